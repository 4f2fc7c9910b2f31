package pki

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// DefaultRenewInterval is how often a Renewer looks at its leaves.
const DefaultRenewInterval = time.Hour

// RenewerConfig says what a Renewer keeps valid.
type RenewerConfig struct {
	// CA returns the CA that issues the leaves; it is called every pass so a
	// rotated CA is picked up (e.g. a closure over LoadCA). Required.
	CA func() (*CA, error)
	// Leaves are the certificates to keep valid.
	Leaves []Leaf
	// Interval between passes; 0 = DefaultRenewInterval.
	Interval time.Duration
	// CACheck, when > 0, is how often Run also looks at the CA alone: when
	// it is not the CA of the last pass (a rotation made another CA sign,
	// nicoctl ca activate), Run renews at once rather than at the next
	// Interval.
	CACheck time.Duration
	// OnRenew, if set, is called after a leaf was re-issued and written (to
	// restart what cannot reload, or to count renewals in tests).
	OnRenew func(Due)
}

// Renewer re-issues leaf certificates before they expire:
//
//	     ┌───────── every Interval ─────────┐
//	     ▼                                  │
//	observe files ─▶ DueLeaves ─▶ sign the leaf's key, write cert, OnRenew
//
// A leaf is due when missing, when a third of its lifetime is left, when the
// CA changed, or when its Request changed (new SANs). A leaf keeps its key:
// its certificate file is replaced atomically (0600), and readers that load
// the pair per handshake (etcd, ClientTLS) use it at their next handshake.
// A leaf without a key gets a new pair (WritePair); each pass first
// finishes a pair's write that a crash cut short (RecoverPair).
type Renewer struct {
	cfg RenewerConfig
	log *slog.Logger
	// Now is the clock; tests replace it.
	Now func() time.Time
}

// NewRenewer returns a Renewer; it starts nothing until Run.
func NewRenewer(cfg RenewerConfig, log *slog.Logger) (*Renewer, error) {
	if cfg.CA == nil {
		return nil, errors.New("pki: renewer: no CA")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultRenewInterval
	}
	for _, l := range cfg.Leaves {
		if l.CertFile == "" || l.KeyFile == "" {
			return nil, fmt.Errorf("%w: leaf %q: certificate and key files are required", ErrBadRequest, l.Name)
		}
		if err := l.Request.validate(); err != nil {
			return nil, fmt.Errorf("leaf %q: %w", l.Name, err)
		}
	}
	return &Renewer{cfg: cfg, log: log.With("component", "pki-renewer"), Now: time.Now}, nil
}

// Run renews once, then every Interval (and when CACheck sees another CA),
// until ctx ends. A failed pass is logged and retried at the next tick; Run
// returns nil when ctx ends.
func (r *Renewer) Run(ctx context.Context) error {
	tick := time.NewTicker(r.cfg.Interval)
	defer tick.Stop()
	var check <-chan time.Time
	if r.cfg.CACheck > 0 {
		t := time.NewTicker(r.cfg.CACheck)
		defer t.Stop()
		check = t.C
	}
	for {
		_, last, err := r.renewOnce(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("certificate renewal failed; retrying later", "err", err, "in", r.cfg.Interval)
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
				break wait
			case <-check:
				if ca, err := r.cfg.CA(); err == nil && (last == nil || !ca.Cert.Equal(last)) {
					r.log.Info("another CA signs now; renewing", "ca", ca.Cert.Subject.CommonName)
					break wait
				}
			}
		}
	}
}

// RenewOnce runs one pass and returns the leaves it re-issued. A leaf that
// fails does not stop the others; the errors are joined.
func (r *Renewer) RenewOnce(ctx context.Context) ([]Due, error) {
	done, _, err := r.renewOnce(ctx)
	return done, err
}

// renewOnce is RenewOnce, also returning the CA certificate of the pass.
func (r *Renewer) renewOnce(ctx context.Context) ([]Due, *x509.Certificate, error) {
	ca, err := r.cfg.CA()
	if err != nil {
		return nil, nil, fmt.Errorf("pki: renewer: CA: %w", err)
	}
	for _, l := range r.cfg.Leaves {
		if err := RecoverPair(l.CertFile, l.KeyFile); err != nil {
			return nil, ca.Cert, fmt.Errorf("pki: renewer: leaf %q: %w", l.Name, err)
		}
	}
	now := r.Now()
	due := DueLeaves(ca.Cert, r.observe(), now)
	if err := ctx.Err(); err != nil && len(due) > 0 {
		return nil, ca.Cert, err
	}
	// The leaves are issued side by side (each is a key generation and a
	// signature, written to files of its own): a machine's first start
	// waits for all of them before it talks to etcd.
	serials := make([]string, len(due))
	errs := make([]error, len(due))
	var wg sync.WaitGroup
	for i, d := range due {
		wg.Go(func() { serials[i], errs[i] = r.renew(ca, d.Leaf, now) })
	}
	wg.Wait()
	var done []Due
	for i, d := range due {
		if errs[i] != nil {
			errs[i] = fmt.Errorf("pki: renew %q: %w", d.Leaf.Name, errs[i])
			continue
		}
		r.log.Info("certificate renewed", "leaf", d.Leaf.Name, "cn", d.Leaf.Request.CommonName,
			"reason", string(d.Reason), "serial", serials[i], "cert", d.Leaf.CertFile)
		done = append(done, d)
		if r.cfg.OnRenew != nil {
			r.cfg.OnRenew(d)
		}
	}
	return done, ca.Cert, errors.Join(errs...)
}

func (r *Renewer) observe() []LeafStatus {
	out := make([]LeafStatus, len(r.cfg.Leaves))
	for i, l := range r.cfg.Leaves {
		out[i].Leaf = l
		pair, err := tls.LoadX509KeyPair(l.CertFile, l.KeyFile) // also checks the key matches
		if err != nil {
			continue
		}
		if c, err := x509.ParseCertificate(pair.Certificate[0]); err == nil {
			out[i].Cert = c
		}
	}
	return out
}

// renew re-issues l. A leaf whose key file holds a key keeps it: only the
// certificate is written, by one rename, so a reader that loads the pair
// on each handshake (etcd, whose loader nico cannot change) never reads a
// new certificate with the old key. A leaf without a usable key gets a new
// pair.
func (r *Renewer) renew(ca *CA, l Leaf, now time.Time) (string, error) {
	var certPEM []byte
	keyPEM, err := os.ReadFile(l.KeyFile)
	if err == nil {
		certPEM, err = ca.Reissue(keyPEM, l.Request, now)
	}
	if err == nil {
		err = WriteFile(l.CertFile, certPEM)
	} else {
		if !errors.Is(err, os.ErrNotExist) {
			r.log.Warn("the leaf's key cannot be kept; issuing a new key", "leaf", l.Name, "key", l.KeyFile, "err", err)
		}
		certPEM, keyPEM, err = ca.Issue(l.Request, now)
		if err != nil {
			return "", err
		}
		err = WritePair(l.CertFile, certPEM, l.KeyFile, keyPEM)
	}
	if err != nil {
		return "", err
	}
	c, err := ParseCert(certPEM)
	if err != nil {
		return "", err
	}
	return c.SerialNumber.Text(16), nil
}
