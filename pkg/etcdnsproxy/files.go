package etcdnsproxy

import (
	"crypto/tls"
	"fmt"

	"github.com/homystack/nico/pkg/pki"
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
// Config. The two key pairs are read again, at the next handshake, once
// either file of a pair changes (nico renews the leaf certificates, valid
// 7 days, and delivers them to the same paths); so are the two CA bundles
// (nico's CA rotation delivers a bundle of the old and the new CA, then the
// new one alone), so a rotation needs no restart of the proxy.
func (f Files) TLS() (backend, server *tls.Config, err error) {
	pair := func(field, cert, key string) (*pki.PairFile, error) {
		p, err := pki.LoadPairFile(cert, key)
		if err != nil {
			return nil, fmt.Errorf("etcdnsproxy: %s: %w", field, err)
		}
		return p, nil
	}
	etcdCA := &caFile{field: "etcd CA", path: f.EtcdCA}
	if _, err := etcdCA.get(); err != nil {
		return nil, nil, err
	}
	clientCA := &caFile{field: "client CA", path: f.ClientCA}
	clientPool, err := clientCA.get()
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
	// crypto/tls reads RootCAs once: the etcd server's chain is checked by
	// verifyServer, against the bundle read at each handshake, instead.
	backend = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true, VerifyConnection: etcdCA.verifyServer,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return id.Get() }}
	server = &tls.Config{MinVersion: tls.VersionTLS12, ClientCAs: clientPool, ClientAuth: tls.RequireAndVerifyClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return serving.Get() }}
	base := server.Clone()
	server.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		pool, err := clientCA.get()
		if err != nil {
			return nil, err
		}
		c := base.Clone()
		c.ClientCAs = pool
		return c, nil
	}
	return backend, server, nil
}
