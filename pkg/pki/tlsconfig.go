package pki

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// ClientTLS is the tls.Config of a client that trusts the CAs in caFile and
// presents the key pair in certFile/keyFile. The pair is a PairFile: read
// again at the handshake after a renewal, so a renewed certificate is used
// without a restart, and never half-renewed; it is read once here too, so
// a missing or broken pair fails now. caFile is read once, here: a changed
// trust bundle needs a new Config (docs/security.md).
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	pool, err := LoadPool(caFile)
	if err != nil {
		return nil, err
	}
	pair, err := LoadPairFile(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return pair.Get()
		},
	}, nil
}

// ServerTLS is the tls.Config of a server presenting the key pair in
// certFile/keyFile (a PairFile, like ClientTLS's). When requireClient is
// true, clients must present a certificate from the CAs in caFile;
// otherwise caFile may be empty.
func ServerTLS(caFile, certFile, keyFile string, requireClient bool) (*tls.Config, error) {
	pair, err := LoadPairFile(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return pair.Get()
		},
	}
	if requireClient {
		pool, err := LoadPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// LoadPool reads a PEM file of CA certificates (one or a bundle) into a pool.
func LoadPool(caFile string) (*x509.CertPool, error) {
	data, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("pki: CA file: %w", err)
	}
	certs, err := ParseCerts(data)
	if err != nil {
		return nil, fmt.Errorf("pki: CA file %s: %w", caFile, err)
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}
