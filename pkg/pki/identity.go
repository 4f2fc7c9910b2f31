package pki

// Identities: a certificate's Common Name is the etcd user it acts as
// (etcd --client-cert-auth maps the CN to a user; docs/security.md).

// CoordinatorIdentity is the CN of every coordinator's client certificate.
const CoordinatorIdentity = "nico-coordinator"

// RootIdentity is the CN of nicoctl's client certificate on control-plane hosts.
const RootIdentity = "root"

// NodeIdentity is the CN of node name's agent client certificate.
func NodeIdentity(name string) string { return "node:" + name }

// MemberIdentity is the CN of etcd member name's server and peer certificates.
func MemberIdentity(name string) string { return "etcd:" + name }
