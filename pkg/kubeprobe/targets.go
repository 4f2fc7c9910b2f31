package kubeprobe

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"

	"github.com/homystack/nico/pkg/api"
	"gopkg.in/yaml.v3"
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

// kubeconfig is the part of a kubeconfig file the lease reader needs.
type kubeconfig struct {
	CurrentContext string `yaml:"current-context"`
	Clusters       []struct {
		Name    string `yaml:"name"`
		Cluster struct {
			Server                   string `yaml:"server"`
			CertificateAuthorityData string `yaml:"certificate-authority-data"`
		} `yaml:"cluster"`
	} `yaml:"clusters"`
	Users []struct {
		Name string `yaml:"name"`
		User struct {
			ClientCertificateData string `yaml:"client-certificate-data"`
			ClientKeyData         string `yaml:"client-key-data"`
			Token                 string `yaml:"token"`
		} `yaml:"user"`
	} `yaml:"users"`
	Contexts []struct {
		Name    string `yaml:"name"`
		Context struct {
			Cluster string `yaml:"cluster"`
			User    string `yaml:"user"`
		} `yaml:"context"`
	} `yaml:"contexts"`
}

// LeasesFromKubeconfig returns a lease reader with the credential and CA
// of kubeconfig's current context (inline data only, as nico and kubeadm
// write admin.conf), talking to server when given (the machine's own API
// server, whose certificate names the loopback address), else to the
// context's server.
func LeasesFromKubeconfig(data []byte, server string) (*APILeases, error) {
	var kc kubeconfig
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return nil, fmt.Errorf("kubeprobe: kubeconfig: %w", err)
	}
	ctxName := kc.CurrentContext
	if ctxName == "" && len(kc.Contexts) > 0 {
		ctxName = kc.Contexts[0].Name
	}
	var clusterName, userName string
	for _, c := range kc.Contexts {
		if c.Name == ctxName {
			clusterName, userName = c.Context.Cluster, c.Context.User
		}
	}
	l := &APILeases{Server: server}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	found := false
	for _, c := range kc.Clusters {
		if c.Name != clusterName {
			continue
		}
		found = true
		if l.Server == "" {
			l.Server = c.Cluster.Server
		}
		ca, err := base64.StdEncoding.DecodeString(c.Cluster.CertificateAuthorityData)
		if err != nil {
			return nil, fmt.Errorf("kubeprobe: kubeconfig cluster %s: certificate-authority-data: %w", c.Name, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("kubeprobe: kubeconfig cluster %s: %w", c.Name, ErrBadCA)
		}
		cfg.RootCAs = pool
	}
	if !found {
		return nil, fmt.Errorf("kubeprobe: kubeconfig: context %q names no cluster (want current-context naming a context with a cluster)", ctxName)
	}
	for _, u := range kc.Users {
		if u.Name != userName {
			continue
		}
		l.Token = u.User.Token
		if u.User.ClientCertificateData != "" {
			crt, err1 := base64.StdEncoding.DecodeString(u.User.ClientCertificateData)
			key, err2 := base64.StdEncoding.DecodeString(u.User.ClientKeyData)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("kubeprobe: kubeconfig user %s: client-certificate-data or client-key-data is not base64", u.Name)
			}
			pair, err := tls.X509KeyPair(crt, key)
			if err != nil {
				return nil, fmt.Errorf("kubeprobe: kubeconfig user %s: %w", u.Name, err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
	}
	if _, err := url.Parse(l.Server); err != nil || l.Server == "" {
		return nil, fmt.Errorf("kubeprobe: kubeconfig: server %q: want an https URL", l.Server)
	}
	l.Client = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	return l, nil
}

// Close drops the reader's idle connections.
func (l *APILeases) Close() {
	if l.Client != nil {
		l.Client.CloseIdleConnections()
	}
}
