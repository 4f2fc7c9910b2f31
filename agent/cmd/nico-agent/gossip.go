package main

import (
	"context"
	"log/slog"

	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/gossip"
)

// newMesh builds the gossip member from the configuration, or returns nil
// when gossip is not configured (no seeds and no tokenFile).
func newMesh(cfg config.Agent, log *slog.Logger) (*gossip.Mesh, error) {
	if !cfg.Gossip.Enabled(cfg.TokenFile) {
		return nil, nil
	}
	token, err := config.ReadToken(cfg.TokenFile)
	if err != nil {
		return nil, err
	}
	return gossip.New(gossip.Config{
		Name:          cfg.Name,
		BindAddr:      cfg.Gossip.Bind,
		BindPort:      cfg.Gossip.PortNumber(),
		AdvertiseAddr: cfg.Gossip.Advertise,
		Seeds:         cfg.Gossip.Seeds,
		Profile:       gossip.Profile(cfg.Gossip.Profile),
		Token:         token,
		Meta:          gossip.Meta{Name: cfg.Name, Version: Version},
		Logger:        log,
	})
}

// runMesh starts the mesh (binding its port now, so a port in use fails
// the start) and runs it until ctx ends or stop is called; stop returns
// once the mesh has been left.
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
