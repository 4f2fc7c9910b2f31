package main

import (
	"context"
	"log/slog"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/metrics"
)

// serveMetrics adds to reg what is read from the running agent (its
// controllers' health, the mesh, the pki.dir's certificates) and serves
// it on metrics.listen (docs/monitoring.md).
func serveMetrics(ctx context.Context, cfg config.Agent, reg *metrics.Registry, a *agent.Agent, mesh *gossip.Mesh, log *slog.Logger) (stop func(), err error) {
	reg.MustRegister(
		metrics.ControllerHealth("agent", a.Health),
		metrics.Gossip("agent", func() metrics.GossipSource { return metrics.Mesh(mesh) }),
		metrics.CertExpiry(cfg.PKI.Dir),
	)
	srv, err := metrics.ServerFor(cfg.Metrics, reg, log)
	if err != nil {
		return nil, err
	}
	return srv.Start(ctx)
}
