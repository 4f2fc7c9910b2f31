package kubepki

import "time"

// Keys of the secrets.
const (
	KeyCert       = "tls.crt"        // a certificate (or a public key, in <c>-sa)
	KeyKey        = "tls.key"        // its private key
	KeyValue      = "value"          // a kubeconfig or a token
	KeySSHPrivate = "ssh-privatekey" // OpenSSH private key
	KeySSHPublic  = "ssh-publickey"  // authorized_keys line
)

// SecretType is the api.SecretSpec.Type of the secrets Ensure writes
// (Cluster API's).
const SecretType = "cluster.x-k8s.io/secret"

// LeafValidity is the lifetime of every leaf certificate Ensure and Renew
// issue; Renew re-issues one when less than a third is left.
const LeafValidity = 7 * 24 * time.Hour

// CASecret and the functions below are the names of cluster c's secrets.
func CASecret(c string) string { return c + "-ca" }

// EtcdCASecret is the etcd CA's secret, made when nico does not provide etcd.
func EtcdCASecret(c string) string { return c + "-etcd" }

// SASecret is the service-account key pair's secret.
func SASecret(c string) string { return c + "-sa" }

// ProxySecret is the front-proxy CA's secret.
func ProxySecret(c string) string { return c + "-proxy" }

// EtcdClientSecret is the API server's etcd client certificate's secret.
func EtcdClientSecret(c string) string { return c + "-apiserver-etcd-client" }

// KubeconfigSecret is the admin kubeconfig's secret (key "value").
func KubeconfigSecret(c string) string { return c + "-kubeconfig" }

// APIServerSecret is the API server's serving certificate's secret.
func APIServerSecret(c string) string { return c + "-apiserver" }

// KubeletClientSecret is the API server's client certificate to kubelets.
func KubeletClientSecret(c string) string { return c + "-apiserver-kubelet-client" }

// ProxyClientSecret is the API server's front-proxy client certificate.
func ProxyClientSecret(c string) string { return c + "-proxy-client" }

// ControllerManagerSecret is the controller-manager's kubeconfig (key "value").
func ControllerManagerSecret(c string) string { return c + "-controller-manager" }

// SchedulerSecret is the scheduler's kubeconfig (key "value").
func SchedulerSecret(c string) string { return c + "-scheduler" }

// TokenSecret is the cluster's join token (key "value").
func TokenSecret(c string) string { return c + "-join-token" }

// SSHSecret is machine m's SSH key pair in cluster c. The dot cannot
// occur in a cluster's name, so no two (cluster, machine) pairs share it.
func SSHSecret(c, m string) string { return c + "-ssh." + m }

// EtcdPrefix is the API server's --etcd-prefix for cluster c (provider nico).
func EtcdPrefix(c string) string { return "/clusters/" + c + "/registry" }

// EtcdKeyPrefix is what every key the API server writes starts with, and
// what the cluster's etcd role reaches.
func EtcdKeyPrefix(c string) string { return EtcdPrefix(c) + "/" }

// EtcdUser is cluster c's etcd user and role, the CN of its etcd client
// certificate.
func EtcdUser(c string) string { return "kubernetes:" + c }

// CompactRevKey is the key outside its prefix that the API server's own
// compactor reads and writes; with --etcd-compaction-interval=0 (required
// here, see the package doc) it has no compactor and never touches it.
const CompactRevKey = "compact_rev_key"
