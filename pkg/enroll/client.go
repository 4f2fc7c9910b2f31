package enroll

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/token"
)

// ClientConfig is what a joining machine knows.
type ClientConfig struct {
	// Endpoints are join endpoints as host:port, tried in order.
	Endpoints []string
	Token     token.Token
	Name      string
	Roles     []api.Role
	// Timeout bounds each request; zero: 30s.
	Timeout time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// RateLimitedError is returned (wrapping ErrRateLimited) when an endpoint
// asks the machine to wait.
type RateLimitedError struct {
	Endpoint   string
	RetryAfter time.Duration
	Message    string
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("%v: join endpoint %s: %s", ErrRateLimited, e.Endpoint, e.Message)
}

// Unwrap makes errors.Is(err, ErrRateLimited) hold.
func (e *RateLimitedError) Unwrap() error { return ErrRateLimited }

// Join proves the token to the first endpoint that answers and sends
// csrPEM; it returns the signed certificate and the cluster's answer.
// A refusal (token unknown, expired, revoked, role not allowed, CA proof
// mismatch, rate limited) is returned at once; an endpoint that cannot be
// reached or fails is skipped for the next.
func Join(ctx context.Context, cfg ClientConfig, csrPEM []byte) (*Response, error) {
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
	var errs []error
	for _, ep := range cfg.Endpoints {
		resp, err := joinOne(ctx, cfg, ep, csrPEM)
		if err == nil {
			return resp, nil
		}
		if !errors.Is(err, ErrUnreachable) && !errors.Is(err, ErrServer) {
			return nil, err
		}
		cfg.Log.Warn("join endpoint failed, trying the next", "endpoint", ep, "err", err)
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func joinOne(ctx context.Context, cfg ClientConfig, ep string, csrPEM []byte) (*Response, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	pool, err := discover(ctx, cfg, ep)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("join: nonce: %w", err)
	}
	body, err := json.Marshal(Request{TokenID: cfg.Token.ID, Name: cfg.Name, Roles: cfg.Roles, CSRPEM: string(csrPEM), Nonce: hex.EncodeToString(nonce), Time: cfg.Now().UTC()})
	if err != nil {
		return nil, fmt.Errorf("join: encode request: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+ep+PathJoin, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, ep, err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set(ProofHeader, mac(cfg.Token.Secret, body))
	var resp Response
	if err := do(pinned(pool), hr, ep, &resp, nil); err != nil {
		return nil, err
	}
	if resp.CertPEM == "" {
		return nil, fmt.Errorf("%w: %s answered without a certificate", ErrServer, ep)
	}
	return &resp, nil
}

// discover asks ep for the CA, checks the proof and that ep's TLS
// certificate chains to that CA, and returns the CA to pin.
func discover(ctx context.Context, cfg ClientConfig, ep string) (*x509.CertPool, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+ep+PathDiscovery+"?id="+url.QueryEscape(cfg.Token.ID), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, ep, err)
	}
	// The server is not verified yet: the proof below is what verifies it.
	unverified := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}}
	var d Discovery
	var peer []*x509.Certificate
	if err := do(unverified, hr, ep, &d, &peer); err != nil {
		return nil, err
	}
	mismatch := func(why string) error {
		return fmt.Errorf("%w: join endpoint %s %s; either the token's secret is wrong or something between this machine and the endpoint is impersonating it. Nothing was sent; check the token (id %s) and the network path", ErrCAProofMismatch, ep, why, cfg.Token.ID)
	}
	cas, err := pki.ParseCerts([]byte(d.CAPEM))
	if err != nil || len(cas) == 0 {
		return nil, mismatch("sent no valid CA certificate")
	}
	if !macEqual(cfg.Token.Secret, cas[0].Raw, d.Proof) {
		return nil, mismatch("could not prove it knows the token's secret")
	}
	pool := x509.NewCertPool()
	for _, c := range cas {
		pool.AddCert(c)
	}
	if err := verifyChain(pool, peer); err != nil {
		return nil, mismatch("presented a TLS certificate that is not from the CA it proved (" + err.Error() + ")")
	}
	return pool, nil
}

// verifyChain checks that the peer's leaf chains to pool for server use.
// The host name is not checked: endpoints are often addresses, and every
// server certificate from the cluster CA is a control-plane machine's.
func verifyChain(pool *x509.CertPool, peer []*x509.Certificate) error {
	if len(peer) == 0 {
		return errors.New("no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range peer[1:] {
		inter.AddCert(c)
	}
	_, err := peer[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// pinned is an HTTP client that trusts only pool.
func pinned(pool *x509.CertPool) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by VerifyConnection: chain to the pinned CA, no host name
		VerifyConnection: func(cs tls.ConnectionState) error {
			if err := verifyChain(pool, cs.PeerCertificates); err != nil {
				return fmt.Errorf("%w: the join endpoint's certificate is not from the pinned CA: %v", ErrCAProofMismatch, err)
			}
			return nil
		},
	}}}
}

// do sends hr and decodes a 200 answer into out, or a Problem into the
// matching error.
func do(c *http.Client, hr *http.Request, ep string, out any, peer *[]*x509.Certificate) error {
	defer c.CloseIdleConnections()
	resp, err := c.Do(hr)
	if err != nil {
		if errors.Is(err, ErrCAProofMismatch) {
			return err
		}
		return fmt.Errorf("%w: %s: %v", ErrUnreachable, ep, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnreachable, ep, err)
	}
	if resp.StatusCode == http.StatusOK {
		if peer != nil && resp.TLS != nil {
			*peer = resp.TLS.PeerCertificates
		}
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("%w: %s: answer: %v", ErrServer, ep, err)
		}
		return nil
	}
	var p Problem
	if err := json.Unmarshal(body, &p); err != nil || p.Code == "" {
		return fmt.Errorf("%w: %s answered %s", ErrServer, ep, resp.Status)
	}
	if p.Code == CodeRateLimited {
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return &RateLimitedError{Endpoint: ep, RetryAfter: time.Duration(secs) * time.Second, Message: p.Message}
	}
	return fmt.Errorf("%w: join endpoint %s: %s", codeErr(p.Code), ep, p.Message)
}

// codeErr maps a problem code to the error a joining machine sees.
func codeErr(code string) error {
	switch code {
	case CodeUnknown:
		return token.ErrUnknown
	case CodeExpired:
		return token.ErrExpired
	case CodeRevoked:
		return token.ErrRevoked
	case CodeRoleNotAllowed:
		return token.ErrRoleNotAllowed
	case CodeBadProof:
		return ErrBadProof
	case CodeReplayed:
		return ErrReplayed
	case CodeClockSkew:
		return ErrClockSkew
	case CodeBadRequest:
		return ErrBadRequest
	case CodeNameInUse:
		return ErrNameInUse
	case CodeNoClientCert:
		return ErrNoClientCert
	case CodeCertExpired:
		return ErrCertExpired
	case CodeCertNotYetValid:
		return ErrClockSkew
	case CodeBadClientCert:
		return ErrBadClientCert
	case CodeNotNode:
		return ErrNotNode
	case CodeNodeRemoved:
		return ErrNodeRemoved
	default:
		return ErrServer
	}
}
