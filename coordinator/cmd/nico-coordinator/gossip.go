package main

import (
	"context"
	"log/slog"

	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/gossip"
)

// Version is set at build time (make build: -X main.Version).
var Version = "dev"

// newMesh builds the candidate's member of the gossip mesh, named
// "<name>/coordinator" beside the machine's agent, or returns nil when
// gossip is not configured.
func newMesh(cfg config.Coordinator, log *slog.Logger) (*gossip.Mesh, error) {
	if !cfg.Gossip.Enabled(cfg.TokenFile) {
		return nil, nil
	}
	token, err := config.ReadToken(cfg.TokenFile)
	if err != nil {
		return nil, err
	}
	return gossip.New(gossip.Config{
		Name:          cfg.Name + "/coordinator",
		BindAddr:      cfg.Gossip.Bind,
		BindPort:      cfg.Gossip.PortNumber(),
		AdvertiseAddr: cfg.Gossip.Advertise,
		Seeds:         cfg.Gossip.Seeds,
		Profile:       gossip.Profile(cfg.Gossip.Profile),
		Token:         token,
		Meta:          gossip.Meta{Name: cfg.Name, Roles: []string{"coordinator"}, Version: Version, Health: gossip.HealthOK},
		Logger:        log,
	})
}

// runMesh starts m (a port in use fails here) and runs it until ctx ends
// or stop is called; stop returns once the mesh has been left.
func runMesh(ctx context.Context, m *gossip.Mesh, log *slog.Logger) (stop func(), err error) {
	if err := m.Start(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := m.Run(ctx); err != nil {
			log.Error("gossip stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}
