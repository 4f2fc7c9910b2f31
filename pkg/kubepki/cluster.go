package kubepki

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/homystack/nico/pkg/pki"
)

// Provider is who runs the cluster's datastore (spec.etcd.provider).
type Provider string

// Providers.
const (
	ProviderNico         Provider = "nico"         // nico's etcd, under EtcdPrefix (the default)
	ProviderExternal     Provider = "external"     // an etcd the user gives
	ProviderDistribution Provider = "distribution" // the distribution's own (k3s's embedded etcd)
)

// Sentinel errors.
var (
	// ErrNotOwned: a secret of the name exists and belongs to another
	// cluster (or to none); it is never taken over.
	ErrNotOwned = errors.New("kubepki: secret belongs to another cluster")
	// ErrBadCluster: the Cluster cannot be provisioned as given.
	ErrBadCluster = errors.New("kubepki: bad cluster")
)

// Cluster is what the PKI of one KubernetesCluster follows from.
type Cluster struct {
	// Name is the cluster's name (no "." or "/").
	Name string
	// Endpoint is the URL clients reach the API server at
	// (https://host:port, spec.controlPlaneEndpoint); the kubeconfigs are
	// made once it is known.
	Endpoint string
	// Provider is the etcd provider ("" = ProviderNico).
	Provider Provider
	// APIServerNames are the control-plane machines' addresses and names
	// the serving certificate also carries.
	APIServerNames []string
	// ServiceIP is the kubernetes service's address (10.96.0.1 when nil).
	ServiceIP net.IP
	// Machines get an SSH key each; keys of machines no longer listed
	// are deleted.
	Machines []string
	// CA is the user's CA ("override CA for the entire setup"): used as
	// <c>-ca when that does not exist yet. nil: Ensure makes one.
	CA *UserCA
	// NicoCA is nico's CA, which signs the API server's etcd client
	// certificate for provider nico (the coordinator's pki.dir CA).
	NicoCA *pki.CA
	// DistributionKubeconfig: the distribution writes the admin
	// kubeconfig (spec.kubeconfig.path) and a control-plane agent
	// publishes it as KubeconfigSecret; Ensure makes none.
	DistributionKubeconfig bool
}

// UserCA is a CA a user brings: its certificate and key, PEM.
type UserCA struct {
	CertPEM, KeyPEM []byte
}

func (c Cluster) provider() Provider {
	if c.Provider == "" {
		return ProviderNico
	}
	return c.Provider
}

func (c Cluster) validate() error {
	if c.Name == "" || strings.ContainsAny(c.Name, "./") {
		return fmt.Errorf("%w: name %q: want a non-empty name without \".\" or \"/\"", ErrBadCluster, c.Name)
	}
	switch c.provider() {
	case ProviderNico:
		if c.NicoCA == nil {
			return fmt.Errorf("%w: %s: provider nico needs nico's CA to sign the API server's etcd client certificate", ErrBadCluster, c.Name)
		}
	case ProviderExternal, ProviderDistribution:
	default:
		return fmt.Errorf("%w: %s: etcd provider %q: want nico, external or distribution", ErrBadCluster, c.Name, c.Provider)
	}
	for _, m := range c.Machines {
		if m == "" || strings.Contains(m, "/") {
			return fmt.Errorf("%w: %s: machine %q: want a non-empty name without \"/\"", ErrBadCluster, c.Name, m)
		}
	}
	return nil
}
