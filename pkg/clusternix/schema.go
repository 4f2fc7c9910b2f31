// Package clusternix renders cluster.nix, the file nico writes into a
// Kubernetes cluster's flake for every machine of the cluster: a typed,
// versioned description (schema version 3) of the cluster's name, version,
// control-plane endpoint, nodes by role, etcd, how each component runs and the on-host paths of the
// files nico delivers. The flake checks it with nixos-module/lib/cluster-schema.nix,
// the Nix side of the same schema, so that generator and flake cannot drift.
package clusternix

// SchemaVersion is the version of the cluster.nix schema this package
// renders (the file's schemaVersion).
const SchemaVersion = 3

// FileName is where cluster.nix goes in the flake's directory: the
// additionalFiles path of each machine's NixosConfiguration.
const FileName = "cluster.nix"

// Cluster is the content of one cluster.nix.
type Cluster struct {
	// Name is the KubernetesCluster's name, a DNS label.
	Name string
	// Version is the Kubernetes version the flake deploys, "1.37" or
	// "1.37.2"; a leading "v" is accepted and left out of the file.
	Version string
	// ControlPlaneEndpoint is the address clients reach the API server at.
	ControlPlaneEndpoint Endpoint
	// FirstServer names the control-plane node that initialises the
	// cluster, for distributions that need one (k3s's clusterInit); empty
	// when none is needed. Required with EtcdDistribution.
	FirstServer string
	// Nodes are the cluster's machines by role.
	Nodes Nodes
	// Etcd is the datastore the API servers use.
	Etcd Etcd
	// Components are how the flake runs the API server, controller-manager,
	// scheduler and kubelet.
	Components Components
	// Paths are where the delivered files land on every machine.
	Paths Paths
}

// Endpoint is a host (an IP address or a DNS name) and a port.
type Endpoint struct {
	Host string
	Port int
}

// Nodes are the cluster's machines grouped by role; cluster.nix lists each
// group sorted by name.
type Nodes struct {
	ControlPlane []Node
	DataPlane    []Node
}

// Node is one machine of the cluster.
type Node struct {
	// Name is the machine's name in nico, a DNS label.
	Name string
	// Addresses are its IP addresses or DNS names, the preferred first; the
	// order is kept.
	Addresses []string
}

// EtcdProvider says who runs the cluster's datastore.
type EtcdProvider string

// The etcd providers of KubernetesCluster spec.etcd.provider.
const (
	// EtcdNico: the fleet's etcd that nico runs, under Etcd.Prefix.
	EtcdNico EtcdProvider = "nico"
	// EtcdExternal: endpoints the user gives.
	EtcdExternal EtcdProvider = "external"
	// EtcdDistribution: the distribution's own datastore (k3s's embedded
	// etcd); no endpoints.
	EtcdDistribution EtcdProvider = "distribution"
)

// Etcd is the cluster's datastore.
type Etcd struct {
	Provider EtcdProvider
	// Endpoints are client URLs (https://host:port); cluster.nix lists them
	// sorted. Required for nico and external, empty for distribution.
	Endpoints []string
	// Prefix is the key prefix of the cluster's data (the API server's
	// --etcd-prefix), required for nico, optional for external, empty for
	// distribution; empty too with Proxy (the distribution sets none).
	Prefix string
	// Proxy, with provider nico only, is the namespacing proxy every
	// control-plane machine runs for a distribution that cannot set an
	// etcd key prefix (k3s; KubernetesCluster spec.etcd.namespace): the
	// distribution talks to it on loopback (cluster.nix etcd.proxy).
	Proxy *EtcdProxy
}

// EtcdProxy is the namespacing etcd proxy of a control-plane machine
// (nico-etcd-proxy, package etcdnsproxy).
type EtcdProxy struct {
	// Namespace is prefixed to every key: "/clusters/<c>/".
	Namespace string
	// Listen is where it serves, on loopback (DefaultProxyListen).
	Listen Endpoint
	// ClientCommonName is the only client certificate Common Name it
	// serves: the cluster's etcd user, kubernetes:<c>.
	ClientCommonName string
}

// DefaultProxyListen is where a control-plane machine's namespacing etcd
// proxy listens: loopback, beside etcd's 2379.
var DefaultProxyListen = Endpoint{Host: "127.0.0.1", Port: 2479}

// Paths are the absolute on-host paths of the files nico delivers.
// DefaultPaths follows kubeadm's layout under /etc/kubernetes/pki/ and keeps
// nico's own files under /var/lib/nico/cluster/.
type Paths struct {
	JoinToken               string // the servers' join token, on control-plane machines
	BootstrapKubeconfig     string // the kubelet's bootstrap kubeconfig (endpoint, CA, bootstrap token)
	BootstrapToken          string // the bootstrap token alone (a token file, k3s's agent)
	MachineSSHKey           string // this machine's SSH private key
	CACert                  string // the cluster CA (ca.crt)
	CAKey                   string // its key (ca.key), on control-plane machines
	APIServerCert           string // the API server's serving certificate (apiserver.crt)
	APIServerKey            string // and its key
	EtcdCACert              string // the CA of the etcd servers' certificates (etcd/ca.crt)
	APIServerEtcdClientCert string // the API server's etcd client certificate
	APIServerEtcdClientKey  string // and its key
	ServiceAccountKey       string // the service-account signing key (sa.key)
	ServiceAccountPub       string // its public key (sa.pub)
	FrontProxyCACert        string // the front-proxy CA (front-proxy-ca.crt)
	FrontProxyCAKey         string // its key (front-proxy-ca.key)
	Kubeconfig              string // the kubeconfig nico publishes (admin.conf)
}

// DefaultPaths returns kubeadm's layout for the certificates and keys, and
// /var/lib/nico/cluster/ for the join token and the machine's SSH key.
func DefaultPaths() Paths {
	const pki = "/etc/kubernetes/pki/"
	return Paths{
		JoinToken:               "/var/lib/nico/cluster/join-token",
		BootstrapKubeconfig:     "/etc/kubernetes/bootstrap-kubelet.conf",
		BootstrapToken:          "/var/lib/nico/cluster/bootstrap-token",
		MachineSSHKey:           "/var/lib/nico/cluster/machine-ssh-key",
		CACert:                  pki + "ca.crt",
		CAKey:                   pki + "ca.key",
		APIServerCert:           pki + "apiserver.crt",
		APIServerKey:            pki + "apiserver.key",
		EtcdCACert:              pki + "etcd/ca.crt",
		APIServerEtcdClientCert: pki + "apiserver-etcd-client.crt",
		APIServerEtcdClientKey:  pki + "apiserver-etcd-client.key",
		ServiceAccountKey:       pki + "sa.key",
		ServiceAccountPub:       pki + "sa.pub",
		FrontProxyCACert:        pki + "front-proxy-ca.crt",
		FrontProxyCAKey:         pki + "front-proxy-ca.key",
		Kubeconfig:              "/etc/kubernetes/admin.conf",
	}
}

// fields lists Paths by their cluster.nix attribute names, sorted.
func (p Paths) fields() []field {
	return []field{
		{"apiserverCert", p.APIServerCert},
		{"apiserverEtcdClientCert", p.APIServerEtcdClientCert},
		{"apiserverEtcdClientKey", p.APIServerEtcdClientKey},
		{"apiserverKey", p.APIServerKey},
		{"bootstrapKubeconfig", p.BootstrapKubeconfig},
		{"bootstrapToken", p.BootstrapToken},
		{"caCert", p.CACert},
		{"caKey", p.CAKey},
		{"etcdCACert", p.EtcdCACert},
		{"frontProxyCACert", p.FrontProxyCACert},
		{"frontProxyCAKey", p.FrontProxyCAKey},
		{"joinToken", p.JoinToken},
		{"kubeconfig", p.Kubeconfig},
		{"machineSSHKey", p.MachineSSHKey},
		{"serviceAccountKey", p.ServiceAccountKey},
		{"serviceAccountPub", p.ServiceAccountPub},
	}
}

// field is one named string of cluster.nix.
type field struct{ name, value string }
