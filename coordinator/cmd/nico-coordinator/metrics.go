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

// serveMetrics gives c its metrics (metrics.ForCoordinator: its leader
// controllers' health, the mesh, the certificates beside tls.certFile)
// and serves them on metrics.listen (docs/monitoring.md).
func serveMetrics(ctx context.Context, cfg config.Coordinator, c *coordinator.Coordinator, mesh *gossip.Mesh, log *slog.Logger) (stop func(), err error) {
	reg, m := metrics.ForCoordinator(c.Health, func() metrics.GossipSource { return metrics.Mesh(mesh) }, filepath.Dir(cfg.TLS.CertFile))
	c.Metrics = m
	srv, err := metrics.ServerFor(cfg.Metrics, reg, log)
	if err != nil {
		return nil, err
	}
	return srv.Start(ctx)
}
