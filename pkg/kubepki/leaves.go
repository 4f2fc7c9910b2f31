package kubepki

import (
	"crypto"
	"crypto/x509"
	"net"
	"net/url"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/pki"
)

// NicoCA names the issuer of a leaf that nico's own CA signs (the etcd
// client certificate with provider nico).
const NicoCA = ""

// Leaf is one leaf certificate of a cluster: the secret it lives in, the
// secret of the CA that signs it, and what it says. A kubeconfig leaf
// lives inside the kubeconfig in the secret's "value", for Server.
type Leaf struct {
	Secret     string
	Issuer     string // a CA secret's name, or NicoCA
	Request    pki.Request
	Kubeconfig bool
	Server     string
}

// Kubernetes identities of the leaves (the names kubeadm gives them).
const (
	adminUser        = "kubernetes-admin"
	mastersGroup     = "system:masters"
	apiServerCN      = "kube-apiserver"
	kubeletClientCN  = "kube-apiserver-kubelet-client"
	proxyClientCN    = "front-proxy-client"
	etcdClientCN     = "kube-apiserver-etcd-client" // providers external, distribution
	controllerMgrCN  = "system:kube-controller-manager"
	schedulerCN      = "system:kube-scheduler"
	defaultServiceIP = "10.96.0.1"
)

// Leaves are cluster c's leaf certificates, in a fixed order. The
// kubeconfigs are left out while c has no endpoint.
func Leaves(c Cluster) []Leaf {
	ca := CASecret(c.Name)
	client := func(cn string, o ...string) pki.Request {
		return pki.Request{CommonName: cn, Organization: o, Usage: pki.UsageClient, Validity: LeafValidity}
	}
	etcd := Leaf{Secret: EtcdClientSecret(c.Name), Issuer: NicoCA, Request: client(EtcdUser(c.Name))}
	if c.provider() != ProviderNico {
		etcd = Leaf{Secret: EtcdClientSecret(c.Name), Issuer: EtcdCASecret(c.Name), Request: client(etcdClientCN)}
	}
	leaves := []Leaf{
		{Secret: APIServerSecret(c.Name), Issuer: ca, Request: c.servingRequest()},
		{Secret: KubeletClientSecret(c.Name), Issuer: ca, Request: client(kubeletClientCN, mastersGroup)},
		{Secret: ProxyClientSecret(c.Name), Issuer: ProxySecret(c.Name), Request: client(proxyClientCN)},
		etcd,
	}
	if c.Endpoint == "" {
		return leaves
	}
	if !c.DistributionKubeconfig {
		leaves = append(leaves, Leaf{Secret: KubeconfigSecret(c.Name), Issuer: ca, Request: client(adminUser, mastersGroup), Kubeconfig: true, Server: c.Endpoint})
	}
	return append(leaves,
		Leaf{Secret: ControllerManagerSecret(c.Name), Issuer: ca, Request: client(controllerMgrCN), Kubeconfig: true, Server: c.Endpoint},
		Leaf{Secret: SchedulerSecret(c.Name), Issuer: ca, Request: client(schedulerCN), Kubeconfig: true, Server: c.Endpoint},
	)
}

// servingRequest is the API server's serving certificate: the service's
// names and first IP, loopback, the endpoint's host and c's addresses.
func (c Cluster) servingRequest() pki.Request {
	r := pki.Request{CommonName: apiServerCN, Usage: pki.UsageServer, Validity: LeafValidity,
		DNSNames: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
		IPs:      []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(defaultServiceIP)},
	}
	if c.ServiceIP != nil {
		r.IPs[1] = c.ServiceIP
	}
	hosts := slices.Clone(c.APIServerNames)
	if u, err := url.Parse(c.Endpoint); err == nil && u.Hostname() != "" {
		hosts = append(hosts, u.Hostname())
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(r.IPs, ip.Equal) {
				r.IPs = append(r.IPs, ip)
			}
		} else if !slices.Contains(r.DNSNames, h) {
			r.DNSNames = append(r.DNSNames, h)
		}
	}
	return r
}

// DueLeaf is a leaf to (re-)issue and why.
type DueLeaf struct {
	Leaf   Leaf
	Reason pki.Reason
}

// Due decides which leaves to (re-)issue at now, from the secrets there
// are (by name) and the CA certificates (by issuer name; NicoCA for nico's
// CA). It is pure. A leaf is due when its secret is missing or does not
// hold a matching key pair, when another CA signed it, when its names or
// its kubeconfig's server changed, or when less than a third of its
// lifetime is left (pki.DueLeaves). A leaf whose issuer is unknown is
// not due: it cannot be issued.
func Due(leaves []Leaf, have map[string]*api.Secret, issuers map[string]*x509.Certificate, now time.Time) []DueLeaf {
	var out []DueLeaf
	for _, l := range leaves {
		issuer, ok := issuers[l.Issuer]
		if !ok || issuer == nil {
			continue
		}
		cert, server := observe(l, have[l.Secret])
		if cert != nil && l.Kubeconfig && server != l.Server {
			out = append(out, DueLeaf{Leaf: l, Reason: pki.ReasonChanged})
			continue
		}
		st := pki.LeafStatus{Leaf: pki.Leaf{Name: l.Secret, Request: l.Request}, Cert: cert}
		for _, d := range pki.DueLeaves(issuer, []pki.LeafStatus{st}, now) {
			out = append(out, DueLeaf{Leaf: l, Reason: d.Reason})
		}
	}
	return out
}

// observe is the leaf's certificate in s (nil when missing, unparsable
// or not matching its key) and, for a kubeconfig, its server.
func observe(l Leaf, s *api.Secret) (*x509.Certificate, string) {
	if s == nil {
		return nil, ""
	}
	certPEM, keyPEM := s.Spec.Data[KeyCert], s.Spec.Data[KeyKey]
	server := ""
	if l.Kubeconfig {
		var err error
		if server, certPEM, keyPEM, err = kubeconfigParts(s.Spec.Data[KeyValue]); err != nil {
			return nil, ""
		}
	}
	cert, err := pki.ParseCert(certPEM)
	if err != nil {
		return nil, ""
	}
	key, err := pki.ParseKey(keyPEM)
	if err != nil {
		return nil, ""
	}
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(cert.PublicKey) {
		return nil, ""
	}
	return cert, server
}
