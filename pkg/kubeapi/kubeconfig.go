package kubeapi

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"

	"gopkg.in/yaml.v3"
)

// Kubeconfig is what a kubeconfig's context names, inline data only (as
// nico and kubeadm write them): its cluster's server and CA, its user's
// client certificate or token.
type Kubeconfig struct {
	// Cluster and User are the names the context gives.
	Cluster, User string
	Server        string
	CAPEM         []byte
	// CertPEM and KeyPEM are the client certificate and key; empty when
	// the user has a token instead.
	CertPEM, KeyPEM []byte
	Token           string
}

// ParseKubeconfig reads kubeconfig b's current context (its first context
// when none is current): the cluster and the user it names, or the file's
// only cluster or user when the names find none.
func ParseKubeconfig(b []byte) (Kubeconfig, error) {
	var kc struct {
		Clusters []struct {
			Name    string `yaml:"name"`
			Cluster struct {
				Server string `yaml:"server"`
				CA     string `yaml:"certificate-authority-data"`
			} `yaml:"cluster"`
		} `yaml:"clusters"`
		Users []struct {
			Name string `yaml:"name"`
			User struct {
				Cert  string `yaml:"client-certificate-data"`
				Key   string `yaml:"client-key-data"`
				Token string `yaml:"token"`
			} `yaml:"user"`
		} `yaml:"users"`
		Contexts []struct {
			Name    string `yaml:"name"`
			Context struct {
				Cluster string `yaml:"cluster"`
				User    string `yaml:"user"`
			} `yaml:"context"`
		} `yaml:"contexts"`
		Current string `yaml:"current-context"`
	}
	var k Kubeconfig
	if err := yaml.Unmarshal(b, &kc); err != nil {
		return k, fmt.Errorf("%w: does not parse: %w", ErrBadKubeconfig, err)
	}
	current := kc.Current
	if current == "" && len(kc.Contexts) > 0 {
		current = kc.Contexts[0].Name
	}
	for _, x := range kc.Contexts {
		if x.Name == current {
			k.Cluster, k.User = x.Context.Cluster, x.Context.User
		}
	}
	found := false
	for _, cl := range kc.Clusters {
		if cl.Name != k.Cluster && len(kc.Clusters) != 1 {
			continue
		}
		found = true
		k.Server = cl.Cluster.Server
		ca, err := base64.StdEncoding.DecodeString(cl.Cluster.CA)
		if err != nil {
			return k, fmt.Errorf("%w: cluster %q: certificate-authority-data is not base64: %w", ErrBadKubeconfig, cl.Name, err)
		}
		k.CAPEM = ca
	}
	if !found || k.Server == "" {
		return k, fmt.Errorf("%w: no server in the current context (%q)", ErrBadKubeconfig, current)
	}
	for _, u := range kc.Users {
		if u.Name != k.User && len(kc.Users) != 1 {
			continue
		}
		crt, err1 := base64.StdEncoding.DecodeString(u.User.Cert)
		key, err2 := base64.StdEncoding.DecodeString(u.User.Key)
		if err1 != nil || err2 != nil {
			return k, fmt.Errorf("%w: user %q: client-certificate-data or client-key-data is not base64", ErrBadKubeconfig, u.Name)
		}
		k.CertPEM, k.KeyPEM, k.Token = crt, key, u.User.Token
	}
	return k, nil
}

// TLS is k's TLS configuration: its CA as the roots, its client
// certificate when it has one.
func (k Kubeconfig) TLS() (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(k.CAPEM) {
		return nil, fmt.Errorf("%w: cluster %q: certificate-authority-data holds no certificate", ErrBadKubeconfig, k.Cluster)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if len(k.CertPEM) > 0 {
		pair, err := tls.X509KeyPair(k.CertPEM, k.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("%w: user %q: client certificate: %w", ErrBadKubeconfig, k.User, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
