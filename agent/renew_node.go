package agent

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/enroll"
	"github.com/homystack/nico/pkg/pki"
)

// RenewNodeCertFunc renews this machine's node certificate in dir through
// the join endpoint (join.Renew: POST /v1/renew, authenticated by the
// current certificate) and returns the new one. Only machines without
// ca.key use it: the others re-issue their certificates themselves.
type RenewNodeCertFunc func(ctx context.Context, dir pki.Dir) (*x509.Certificate, error)

// nodeCertStep is what planNodeCert asks for.
type nodeCertStep int

const (
	nodeCertKeep   nodeCertStep = iota // more than a third of its lifetime left
	nodeCertRenew                      // due and still valid: POST /v1/renew
	nodeCertRejoin                     // expired: only a token can bring a new one
)

// planNodeCert decides what to do with the node certificate certPEM at
// now; the rule is pki.Renewer's (renew when a third of the lifetime is
// left).
func planNodeCert(certPEM []byte, now time.Time) (nodeCertStep, *x509.Certificate, error) {
	c, err := pki.ParseCert(certPEM)
	if err != nil {
		return nodeCertKeep, nil, err
	}
	due, err := pki.NeedsRenewal(certPEM, now)
	switch {
	case err != nil:
		return nodeCertKeep, nil, err
	case !now.Before(c.NotAfter):
		return nodeCertRejoin, c, nil
	case due:
		return nodeCertRenew, c, nil
	}
	return nodeCertKeep, c, nil
}

// nodeCertRenewer is the controller that keeps the node certificate of a
// machine without ca.key valid. Once at start, then every RenewInterval:
//
//	read node.crt
//	  more than 1/3 of its lifetime left ──▶ nothing
//	  due, still valid ───────────────────▶ RenewNodeCert (POST /v1/renew, mutual TLS)
//	  expired (or the endpoint says so) ──▶ log that the node must join again;
//	                                        ObtainCerts (tokenFile) when set
//
// A failed pass is retried with the runtime's backoff, and counts against
// the agent's health. The agent's etcd clients load node.{crt,key} at each
// handshake (pki.ClientTLS), so they present the new certificate without a
// restart.
type nodeCertRenewer struct {
	dir    pki.Dir
	renew  RenewNodeCertFunc // nil: no join endpoint to renew through
	obtain ObtainCertsFunc   // nil: no join token to join again with
	now    func() time.Time
	log    *slog.Logger
}

// nodeCertRenewer is the agent's node-certificate renewer, with the
// renewal and join functions its caller set.
func (a *Agent) nodeCertRenewer() *nodeCertRenewer {
	return &nodeCertRenewer{dir: a.cfg.PKI.Dir, renew: a.RenewNodeCert, obtain: a.ObtainCerts, now: a.Now, log: a.log}
}

// nodeCertRenewal is the renewer's controller, every RenewInterval; nil
// when there is no join endpoint to renew through.
func (a *Agent) nodeCertRenewal() controller.Controller {
	r := a.nodeCertRenewer()
	if r.renew == nil && r.obtain == nil {
		a.log.Warn("the node certificate will not be renewed: no join endpoint to renew it through", "cert", r.dir.Cert(certNode))
		return nil
	}
	return &controller.Func{ControllerName: "node-cert-renewal", Resync: a.RenewInterval, Do: r.once}
}

// once runs one pass.
func (r *nodeCertRenewer) once(ctx context.Context) error {
	b, err := os.ReadFile(r.dir.Cert(certNode))
	if err != nil {
		return fmt.Errorf("agent: node certificate: %w", err)
	}
	step, old, err := planNodeCert(b, r.now())
	if err != nil {
		return fmt.Errorf("agent: node certificate %s: %w", r.dir.Cert(certNode), err)
	}
	switch step {
	case nodeCertKeep:
		return nil
	case nodeCertRejoin:
		return r.rejoin(ctx, old)
	}
	if r.renew == nil {
		return fmt.Errorf("agent: node certificate (serial %s) expires at %s and there is no join endpoint to renew it through: set join.endpoints or gossip.seeds", old.SerialNumber.Text(16), old.NotAfter.UTC().Format(time.RFC3339))
	}
	c, err := r.renew(ctx, r.dir)
	if errors.Is(err, enroll.ErrCertExpired) {
		return r.rejoin(ctx, old)
	}
	if err != nil {
		return fmt.Errorf("agent: renew the node certificate (serial %s, expires %s): %w", old.SerialNumber.Text(16), old.NotAfter.UTC().Format(time.RFC3339), err)
	}
	r.log.Info("node certificate renewed through the join endpoint", "oldSerial", old.SerialNumber.Text(16), "serial", c.SerialNumber.Text(16), "notAfter", c.NotAfter.UTC())
	return nil
}

// rejoin handles an expired node certificate: it can no longer be renewed,
// so the node joins again with its token, when tokenFile holds one.
func (r *nodeCertRenewer) rejoin(ctx context.Context, old *x509.Certificate) error {
	r.log.Error("the node certificate has expired and cannot be renewed: the node must join again with a join token",
		"serial", old.SerialNumber.Text(16), "notAfter", old.NotAfter.UTC(), "cert", r.dir.Cert(certNode))
	if r.obtain == nil {
		return fmt.Errorf("agent: node certificate expired at %s: put a valid join token in tokenFile (nicoctl token create) and restart the agent", old.NotAfter.UTC().Format(time.RFC3339))
	}
	if err := r.obtain(ctx, r.dir); err != nil {
		return fmt.Errorf("agent: join again with the token: %w", err)
	}
	r.log.Info("joined again with the token: new node certificate")
	return nil
}
