package kubeprobe

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeapi"
)

// Targets are the components probes asks for, defaults filled in
// (api.ClusterProbes.WithDefaults), disabled ones left out. The API
// server's endpoint is verified with its CAFile, else clusterCA; the
// others with their CAFile when set. readFile reads a CA file; a CA that
// cannot be read is an error naming the component and the path.
func Targets(probes api.ClusterProbes, clusterCA string, readFile func(string) ([]byte, error)) ([]Target, error) {
	p := probes.WithDefaults()
	var out []Target
	for _, c := range []struct {
		name  string
		probe *api.ComponentProbe
		ca    string
	}{
		{api.ComponentAPIServer, p.APIServer, clusterCA},
		{api.ComponentControllerManager, p.ControllerManager, ""},
		{api.ComponentScheduler, p.Scheduler, ""},
	} {
		if c.probe.Disabled {
			continue
		}
		t := Target{Name: c.name, URL: c.probe.URL, Lease: c.probe.LeaderLease}
		if c.name == api.ComponentAPIServer {
			t.Lease = ""
		}
		caFile := c.probe.CAFile
		if caFile == "" {
			caFile = c.ca
		}
		if caFile != "" {
			b, err := readFile(caFile)
			if err != nil {
				return nil, fmt.Errorf("kubeprobe: %s: caFile %s: %w", c.name, caFile, err)
			}
			t.CA = b
		}
		out = append(out, t)
	}
	return out, nil
}

// LeasesFromKubeconfig returns a lease reader with the credential and CA
// of kubeconfig's current context (kubeapi.ParseKubeconfig), talking to
// server when given (the machine's own API server, whose certificate
// names the loopback address), else to the context's server.
func LeasesFromKubeconfig(data []byte, server string) (*APILeases, error) {
	k, err := kubeapi.ParseKubeconfig(data)
	if err != nil {
		return nil, fmt.Errorf("kubeprobe: %w", err)
	}
	if server == "" {
		server = k.Server
	}
	if u, err := url.Parse(server); err != nil || u.Host == "" {
		return nil, fmt.Errorf("kubeprobe: kubeconfig: server %q: want an https URL", server)
	}
	cfg, err := k.TLS()
	if err != nil {
		return nil, fmt.Errorf("kubeprobe: %w", err)
	}
	return &APILeases{Server: server, Token: k.Token, Client: &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}}, nil
}

// Close drops the reader's idle connections.
func (l *APILeases) Close() {
	if l.Client != nil {
		l.Client.CloseIdleConnections()
	}
}
