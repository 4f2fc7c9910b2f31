package main

import (
	"context"
	"log/slog"

	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/metrics"
)

// serveMetrics serves reg (metrics.ForAgent) on metrics.listen
// (docs/monitoring.md).
func serveMetrics(ctx context.Context, cfg config.Agent, reg *metrics.Registry, log *slog.Logger) (stop func(), err error) {
	srv, err := metrics.ServerFor(cfg.Metrics, reg, log)
	if err != nil {
		return nil, err
	}
	return srv.Start(ctx)
}
