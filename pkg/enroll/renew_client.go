package enroll

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/pki"
)

// RenewConfig is what a node renewing its certificate needs besides its
// pki.dir.
type RenewConfig struct {
	// Endpoints are join endpoints as host:port, tried in order.
	Endpoints []string
	// Timeout bounds each request; zero: 30s.
	Timeout time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// Renew renews the node certificate in d (node.crt, node.key) through the
// first endpoint that answers: it presents the current certificate, pins
// d's ca.crt, sends a new key's request, checks the answer (same CN, from
// the pinned CA, for the new key) and writes the pair (pki.WritePair:
// atomic, 0600, recoverable after a crash; Renew first finishes a write a
// crash cut short, pki.RecoverPair). It returns the new certificate.
//
// A certificate that has expired is not sent: Renew returns ErrCertExpired
// and the node must join again with a token. A refusal is returned at once;
// an endpoint that cannot be reached or fails is skipped for the next.
func Renew(ctx context.Context, cfg RenewConfig, d pki.Dir) (*x509.Certificate, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("%w: no join endpoints given", ErrUnreachable)
	}
	pool, err := pki.LoadPool(d.CACert())
	if err != nil {
		return nil, fmt.Errorf("join: renew: %w", err)
	}
	certFile, keyFile := d.Cert(pki.NodeLeaf), d.Key(pki.NodeLeaf)
	if err := pki.RecoverPair(certFile, keyFile); err != nil {
		return nil, fmt.Errorf("join: renew: %w", err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("join: renew: node key pair: %w", err)
	}
	cur, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("join: renew: %s: %w", certFile, err)
	}
	cn := cur.Subject.CommonName
	if !strings.HasPrefix(cn, pki.NodeIdentity("")) {
		return nil, fmt.Errorf("%w: %s has CN %q, want %s<name>", ErrNotNode, certFile, cn, pki.NodeIdentity(""))
	}
	if now := cfg.Now(); !now.Before(cur.NotAfter) {
		return nil, fmt.Errorf("%w: %s (serial %s) expired at %s; the node must join again with a token", ErrCertExpired, certFile, cur.SerialNumber.Text(16), cur.NotAfter.UTC().Format(time.RFC3339))
	}
	csrPEM, keyPEM, err := pki.NewCSR(cn)
	if err != nil {
		return nil, fmt.Errorf("join: renew: certificate request: %w", err)
	}
	body, err := json.Marshal(RenewRequest{CSRPEM: string(csrPEM)})
	if err != nil {
		return nil, fmt.Errorf("join: renew: encode request: %w", err)
	}
	client := pinnedWithCert(pool, pair)
	var errs []error
	for _, ep := range cfg.Endpoints {
		certPEM, err := renewOne(ctx, cfg, client, ep, body)
		if err == nil {
			c, err := checkRenewed(certPEM, keyPEM, cn, pool, cfg.Now())
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrServer, ep, err)
			}
			if err := pki.WritePair(certFile, certPEM, keyFile, keyPEM); err != nil {
				return nil, fmt.Errorf("join: renew: %w", err)
			}
			return c, nil
		}
		if !errors.Is(err, ErrUnreachable) && !errors.Is(err, ErrServer) {
			return nil, err
		}
		cfg.Log.Warn("join endpoint failed to renew, trying the next", "endpoint", ep, "err", err)
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func renewOne(ctx context.Context, cfg RenewConfig, client *http.Client, ep string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+ep+PathRenew, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, ep, err)
	}
	hr.Header.Set("Content-Type", "application/json")
	var resp RenewResponse
	if err := do(client, hr, ep, &resp, nil); err != nil {
		return nil, err
	}
	if resp.CertPEM == "" {
		return nil, fmt.Errorf("%w: %s answered without a certificate", ErrServer, ep)
	}
	return []byte(resp.CertPEM), nil
}

// checkRenewed checks that certPEM is a client certificate for keyPEM's
// key, with CN cn, from pool, valid at now.
func checkRenewed(certPEM, keyPEM []byte, cn string, pool *x509.CertPool, now time.Time) (*x509.Certificate, error) {
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("the renewed certificate is not for the key sent: %v", err)
	}
	c, err := pki.ParseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("the renewed certificate: %v", err)
	}
	if c.Subject.CommonName != cn {
		return nil, fmt.Errorf("the renewed certificate has CN %q, want %q", c.Subject.CommonName, cn)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: now}); err != nil {
		return nil, fmt.Errorf("the renewed certificate is not a valid client certificate from the pinned CA: %v", err)
	}
	return c, nil
}

// pinnedWithCert is pinned(pool) presenting pair as the client certificate.
func pinnedWithCert(pool *x509.CertPool, pair tls.Certificate) *http.Client {
	c := pinned(pool)
	c.Transport.(*http.Transport).TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &pair, nil
	}
	return c
}
