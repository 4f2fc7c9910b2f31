package etcdnsproxy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
)

// caFile is a CA bundle on disk, read again when its modification time or
// size changes (nico rotates its CA by delivering a bundle of the old and
// the new CA to the same path, later the new one alone).
type caFile struct {
	field, path string
	mu          sync.Mutex
	stamp       os.FileInfo
	pool        *x509.CertPool
}

func (c *caFile) get() (*x509.CertPool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := os.Stat(c.path)
	if err != nil {
		if c.pool != nil {
			// Replaced by a rename: keep the bundle that worked.
			return c.pool, nil
		}
		return nil, fmt.Errorf("etcdnsproxy: %s: %w", c.field, err)
	}
	if c.pool != nil && c.stamp.ModTime().Equal(st.ModTime()) && c.stamp.Size() == st.Size() {
		return c.pool, nil
	}
	b, err := os.ReadFile(c.path)
	if err != nil {
		if c.pool != nil {
			return c.pool, nil
		}
		return nil, fmt.Errorf("etcdnsproxy: %s: %w", c.field, err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		if c.pool != nil {
			// Half-written: keep the bundle that worked.
			return c.pool, nil
		}
		return nil, fmt.Errorf("%w: %s %s: want PEM certificates", ErrConfig, c.field, c.path)
	}
	c.pool, c.stamp = p, st
	return p, nil
}

// verifyServer checks an etcd server's chain against the CA bundle read
// now, and its name against the one dialed: the check crypto/tls makes
// with RootCAs, which it reads only once.
func (c *caFile) verifyServer(cs tls.ConnectionState) error {
	roots, err := c.get()
	if err != nil {
		return err
	}
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("etcdnsproxy: %s: the etcd server presented no certificate", c.field)
	}
	inter := x509.NewCertPool()
	for _, ic := range cs.PeerCertificates[1:] {
		inter.AddCert(ic)
	}
	_, err = cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: cs.ServerName, Roots: roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return fmt.Errorf("etcdnsproxy: etcd server certificate: %w", err)
	}
	return nil
}
