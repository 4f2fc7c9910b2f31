package agent

import (
	"context"
	"os"
	"time"

	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/pki"
)

// nodeCertCheckInterval is how often a ready agent compares node.crt with
// the certificate its node status publishes (api.NodeStatus.Certificate),
// so that a renewed certificate is published within it.
const nodeCertCheckInterval = 5 * time.Second

// nodeCertPEM is the node certificate in cfg's pki.dir; "" without one.
// It is public: nicoctl gossip rotate-key --new-secret seals the new gossip
// secret to its key.
func nodeCertPEM(cfg *Config) string {
	if cfg.PKI.Dir == "" {
		return ""
	}
	b, err := os.ReadFile(cfg.PKI.Dir.Cert(pki.NodeLeaf))
	if err != nil {
		return ""
	}
	return string(b)
}

// nodeCertPublish is the controller that writes the node status again
// when node.crt changed since it was published (a renewal); tick-only, its
// input is a file.
func (a *Agent) nodeCertPublish() controller.Controller {
	return &controller.Func{ControllerName: "node-cert-publish", Resync: nodeCertCheckInterval, Do: a.publishNodeCert}
}

// publishNodeCert writes the node status again when node.crt changed
// since it was published.
func (a *Agent) publishNodeCert(ctx context.Context) error {
	n, ok := a.rec.view()
	if !ok {
		return nil
	}
	phase, msg, published := n.Status.Phase, n.Status.Message, n.Status.Certificate
	if c := nodeCertPEM(&a.cfg); c != "" && c != published {
		if err := a.node.writePhase(ctx, phase, msg); err != nil {
			return err
		}
		a.log.Info("published the node certificate", "reason", "node.crt changed")
	}
	return nil
}
