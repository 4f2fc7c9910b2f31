package agent

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
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

// nodeCertRenewal is the controller that keeps the node certificate of a
// machine without ca.key valid; nil when there is no join endpoint to
// renew it through. Once at start, then every RenewInterval:
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
func (a *Agent) nodeCertRenewal() controller.Controller {
	if a.RenewNodeCert == nil && a.ObtainCerts == nil {
		a.log.Warn("the node certificate will not be renewed: no join endpoint to renew it through", "cert", a.cfg.PKI.Dir.Cert(certNode))
		return nil
	}
	return &controller.Func{ControllerName: "node-cert-renewal", Resync: a.RenewInterval, Do: a.renewNodeOnce}
}

// renewNodeOnce runs one pass of renewNodeCert.
func (a *Agent) renewNodeOnce(ctx context.Context) error {
	d := a.cfg.PKI.Dir
	b, err := os.ReadFile(d.Cert(certNode))
	if err != nil {
		return fmt.Errorf("agent: node certificate: %w", err)
	}
	step, old, err := planNodeCert(b, a.Now())
	if err != nil {
		return fmt.Errorf("agent: node certificate %s: %w", d.Cert(certNode), err)
	}
	switch step {
	case nodeCertKeep:
		return nil
	case nodeCertRejoin:
		return a.rejoin(ctx, old)
	}
	if a.RenewNodeCert == nil {
		return fmt.Errorf("agent: node certificate (serial %s) expires at %s and there is no join endpoint to renew it through: set join.endpoints or gossip.seeds", old.SerialNumber.Text(16), old.NotAfter.UTC().Format(time.RFC3339))
	}
	c, err := a.RenewNodeCert(ctx, d)
	if errors.Is(err, enroll.ErrCertExpired) {
		return a.rejoin(ctx, old)
	}
	if err != nil {
		return fmt.Errorf("agent: renew the node certificate (serial %s, expires %s): %w", old.SerialNumber.Text(16), old.NotAfter.UTC().Format(time.RFC3339), err)
	}
	a.log.Info("node certificate renewed through the join endpoint", "oldSerial", old.SerialNumber.Text(16), "serial", c.SerialNumber.Text(16), "notAfter", c.NotAfter.UTC())
	return nil
}

// rejoin handles an expired node certificate: it can no longer be renewed,
// so the node joins again with its token, when tokenFile holds one.
func (a *Agent) rejoin(ctx context.Context, old *x509.Certificate) error {
	a.log.Error("the node certificate has expired and cannot be renewed: the node must join again with a join token",
		"serial", old.SerialNumber.Text(16), "notAfter", old.NotAfter.UTC(), "cert", a.cfg.PKI.Dir.Cert(certNode))
	if a.ObtainCerts == nil {
		return fmt.Errorf("agent: node certificate expired at %s: put a valid join token in tokenFile (nicoctl token create) and restart the agent", old.NotAfter.UTC().Format(time.RFC3339))
	}
	if err := a.ObtainCerts(ctx, a.cfg.PKI.Dir); err != nil {
		return fmt.Errorf("agent: join again with the token: %w", err)
	}
	a.log.Info("joined again with the token: new node certificate")
	return nil
}
