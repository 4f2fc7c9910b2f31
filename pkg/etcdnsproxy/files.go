package etcdnsproxy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// Files are the PEM files a proxy runs with, as nico delivers them to a
// control-plane machine (cluster.nix's paths).
type Files struct {
	// EtcdCA verifies nico's etcd servers (paths.etcdCACert).
	EtcdCA string
	// Cert and Key are the cluster's etcd client identity
	// (paths.apiserverEtcdClientCert, paths.apiserverEtcdClientKey).
	Cert, Key string
	// ServingCert and ServingKey are the proxy's serving pair (the API
	// server's, whose names include 127.0.0.1 and localhost).
	ServingCert, ServingKey string
	// ClientCA is what a client's certificate must chain to (EtcdCA: the
	// distribution presents the cluster's etcd identity).
	ClientCA string
}

// TLS loads the files into the backend and the server TLS configs of a
// Config.
func (f Files) TLS() (backend, server *tls.Config, err error) {
	pool := func(field, path string) (*x509.CertPool, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("etcdnsproxy: %s: %w", field, err)
		}
		p := x509.NewCertPool()
		if !p.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("%w: %s %s: want PEM certificates", ErrConfig, field, path)
		}
		return p, nil
	}
	pair := func(field, cert, key string) (tls.Certificate, error) {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return c, fmt.Errorf("etcdnsproxy: %s %s, %s: %w", field, cert, key, err)
		}
		return c, nil
	}
	etcdCA, err := pool("etcd CA", f.EtcdCA)
	if err != nil {
		return nil, nil, err
	}
	clientCA, err := pool("client CA", f.ClientCA)
	if err != nil {
		return nil, nil, err
	}
	id, err := pair("etcd client pair", f.Cert, f.Key)
	if err != nil {
		return nil, nil, err
	}
	serving, err := pair("serving pair", f.ServingCert, f.ServingKey)
	if err != nil {
		return nil, nil, err
	}
	backend = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: etcdCA, Certificates: []tls.Certificate{id}}
	server = &tls.Config{MinVersion: tls.VersionTLS12, ClientCAs: clientCA, Certificates: []tls.Certificate{serving}}
	return backend, server, nil
}
