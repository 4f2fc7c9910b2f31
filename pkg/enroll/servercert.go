package enroll

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/homystack/nico/pkg/pki"
)

// ServerCert issues, with the cluster CA, the join endpoint's TLS
// certificate for hosts (addresses or names), kept in memory only.
func ServerCert(ca *pki.CA, name string, hosts []string, now time.Time) (tls.Certificate, error) {
	req := pki.Request{CommonName: "join:" + name, Usage: pki.UsageServer} // 1 year (pki.DefaultValidity), issued anew at each start
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			req.IPs = append(req.IPs, ip)
		} else if h != "" {
			req.DNSNames = append(req.DNSNames, h)
		}
	}
	certPEM, keyPEM, err := ca.Issue(req, now)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("join: server certificate: %w", err)
	}
	c, err := tls.X509KeyPair(append(certPEM, ca.CertPEM...), keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("join: server certificate: %w", err)
	}
	return c, nil
}
