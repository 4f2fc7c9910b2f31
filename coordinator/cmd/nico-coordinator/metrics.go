package main

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/metrics"
)

// serveMetrics gives c its metrics, adds what is read from the running
// candidate (its leader controllers' health, the mesh, the certificates
// beside tls.certFile) and serves them on metrics.listen
// (docs/monitoring.md).
func serveMetrics(ctx context.Context, cfg config.Coordinator, c *coordinator.Coordinator, mesh *gossip.Mesh, log *slog.Logger) (stop func(), err error) {
	reg := metrics.NewRegistry()
	c.Metrics = metrics.NewCoordinator(reg)
	reg.MustRegister(
		metrics.ControllerHealth("coordinator", c.Health),
		metrics.Gossip("coordinator", func() metrics.GossipSource { return metrics.Mesh(mesh) }),
		metrics.CertExpiry(filepath.Dir(cfg.TLS.CertFile)),
	)
	srv, err := metrics.ServerFor(cfg.Metrics, reg, log)
	if err != nil {
		return nil, err
	}
	return srv.Start(ctx)
}
