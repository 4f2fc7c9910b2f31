package kubepki

import (
	"path/filepath"
	"reflect"

	"github.com/homystack/nico/pkg/api"
)

// Role is a machine's part in a cluster.
type Role string

// Roles.
const (
	RoleControlPlane Role = "controlPlane"
	RoleDataPlane    Role = "dataPlane"
)

// Paths are where a machine's files land. DefaultPaths is kubeadm's
// layout; cluster.nix's paths (clusternix.DefaultPaths) name the same
// files at the same places, so that the flake and the files agree.
type Paths struct {
	CACert, CAKey                             string
	SAKey, SAPub                              string
	FrontProxyCACert, FrontProxyCAKey         string
	APIServerCert, APIServerKey               string
	KubeletClientCert, KubeletClientKey       string
	FrontProxyClientCert, FrontProxyClientKey string
	EtcdCACert                                string
	EtcdClientCert, EtcdClientKey             string
	ControllerManagerConf, SchedulerConf      string
	Kubeconfig                                string // the admin kubeconfig (admin.conf)
	JoinToken                                 string
	BootstrapKubeconfig, BootstrapToken       string
	SSHKey, SSHPublicKey                      string
}

// DefaultPaths is kubeadm's layout under /etc/kubernetes, and nico's own
// files under /var/lib/nico/cluster (as clusternix.DefaultPaths).
func DefaultPaths() Paths {
	const pki = "/etc/kubernetes/pki/"
	const nico = "/var/lib/nico/cluster/"
	return Paths{
		CACert: pki + "ca.crt", CAKey: pki + "ca.key",
		SAKey: pki + "sa.key", SAPub: pki + "sa.pub",
		FrontProxyCACert: pki + "front-proxy-ca.crt", FrontProxyCAKey: pki + "front-proxy-ca.key",
		APIServerCert: pki + "apiserver.crt", APIServerKey: pki + "apiserver.key",
		KubeletClientCert: pki + "apiserver-kubelet-client.crt", KubeletClientKey: pki + "apiserver-kubelet-client.key",
		FrontProxyClientCert: pki + "front-proxy-client.crt", FrontProxyClientKey: pki + "front-proxy-client.key",
		EtcdCACert:     pki + "etcd/ca.crt",
		EtcdClientCert: pki + "apiserver-etcd-client.crt", EtcdClientKey: pki + "apiserver-etcd-client.key",
		ControllerManagerConf: "/etc/kubernetes/controller-manager.conf",
		SchedulerConf:         "/etc/kubernetes/scheduler.conf",
		Kubeconfig:            "/etc/kubernetes/admin.conf",
		JoinToken:             nico + "join-token",
		BootstrapKubeconfig:   "/etc/kubernetes/bootstrap-kubelet.conf",
		BootstrapToken:        nico + "bootstrap-token",
		SSHKey:                nico + "machine-ssh-key", SSHPublicKey: nico + "machine-ssh-key.pub",
	}
}

// Layout turns a cluster's secrets into the host files of its machines.
type Layout struct {
	Cluster  string
	Provider Provider // "" = ProviderNico
	// Paths are where files land (DefaultPaths when zero).
	Paths Paths
	// NicoCACertPEM is nico's CA certificate, the etcd CA of provider
	// nico (public: written inline). Give the trust bundle (pki.dir's
	// ca.crt) rather than the signing CA alone: during a CA rotation the
	// etcd members' certificates may be signed by either CA.
	NicoCACertPEM []byte
	// DistributionKubeconfig: the distribution writes admin.conf's
	// counterpart itself (Cluster.DistributionKubeconfig); no admin.conf.
	DistributionKubeconfig bool
}

// Modes of the files.
const (
	modePublic  = "0644" // certificates, public keys
	modePrivate = "0600" // keys, kubeconfigs, the token
)

// HostFiles are machine's files for role, in a fixed order. Every machine
// gets the cluster CA's certificate, the bootstrap kubeconfig (endpoint,
// CA, bootstrap token: what its kubelet joins with), the bootstrap token
// alone (for a distribution that takes a token file, k3s's agent) and its
// SSH key; a control-plane machine also, as kubeadm lays out a
// control-plane node, the join token (the servers' shared token, k3s's
// server token, which never changes), the CA key (the controller-manager signs with it), the service-account
// key pair, the front-proxy CA pair, the API server's certificates and key
// pairs, the etcd CA certificate and client pair, the controller-manager's
// and scheduler's kubeconfigs and admin.conf (the component probes read
// leases with it). A data-plane machine never gets a private key of any
// CA, nor a kubeconfig.
func (l Layout) HostFiles(machine string, role Role) []api.HostFile {
	p := l.Paths
	if p == (Paths{}) {
		p = DefaultPaths()
	}
	c := l.Cluster
	ref := func(path, secret, key, mode string) api.HostFile {
		return api.HostFile{Path: path, SecretRef: &api.SecretKeyRef{Name: secret, Key: key}, Mode: mode}
	}
	files := []api.HostFile{
		ref(p.CACert, CASecret(c), KeyCert, modePublic),
		ref(p.BootstrapKubeconfig, BootstrapTokenSecret(c), KeyKubeconfig, modePrivate),
		ref(p.BootstrapToken, BootstrapTokenSecret(c), KeyValue, modePrivate),
		ref(p.SSHKey, SSHSecret(c, machine), KeySSHPrivate, modePrivate),
		ref(p.SSHPublicKey, SSHSecret(c, machine), KeySSHPublic, modePublic),
	}
	if role != RoleControlPlane {
		return files
	}
	files = append(files,
		ref(p.JoinToken, TokenSecret(c), KeyValue, modePrivate),
		ref(p.CAKey, CASecret(c), KeyKey, modePrivate),
		ref(p.SAKey, SASecret(c), KeyKey, modePrivate),
		ref(p.SAPub, SASecret(c), KeyCert, modePublic),
		ref(p.FrontProxyCACert, ProxySecret(c), KeyCert, modePublic),
		ref(p.FrontProxyCAKey, ProxySecret(c), KeyKey, modePrivate),
		ref(p.APIServerCert, APIServerSecret(c), KeyCert, modePublic),
		ref(p.APIServerKey, APIServerSecret(c), KeyKey, modePrivate),
		ref(p.KubeletClientCert, KubeletClientSecret(c), KeyCert, modePublic),
		ref(p.KubeletClientKey, KubeletClientSecret(c), KeyKey, modePrivate),
		ref(p.FrontProxyClientCert, ProxyClientSecret(c), KeyCert, modePublic),
		ref(p.FrontProxyClientKey, ProxyClientSecret(c), KeyKey, modePrivate),
	)
	if l.Provider == "" || l.Provider == ProviderNico {
		files = append(files, api.HostFile{Path: p.EtcdCACert, Inline: string(l.NicoCACertPEM), Mode: modePublic})
	} else {
		files = append(files, ref(p.EtcdCACert, EtcdCASecret(c), KeyCert, modePublic))
	}
	files = append(files,
		ref(p.EtcdClientCert, EtcdClientSecret(c), KeyCert, modePublic),
		ref(p.EtcdClientKey, EtcdClientSecret(c), KeyKey, modePrivate),
		ref(p.ControllerManagerConf, ControllerManagerSecret(c), KeyValue, modePrivate),
		ref(p.SchedulerConf, SchedulerSecret(c), KeyValue, modePrivate),
	)
	if l.DistributionKubeconfig {
		return files
	}
	return append(files, ref(p.Kubeconfig, KubeconfigSecret(c), KeyValue, modePrivate))
}

// Under is p with every path moved under root (a sandbox machine's
// directory in tests; the exec applier's roots then name root).
func (p Paths) Under(root string) Paths {
	v := reflect.ValueOf(&p).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.String && f.String() != "" {
			f.SetString(filepath.Join(root, f.String()))
		}
	}
	return p
}
