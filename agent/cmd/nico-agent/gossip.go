package main

import (
	"log/slog"

	"github.com/homystack/nico/agent/joinendpoint"
	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/pki"
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
	// A joined machine derives its keys from the cluster's gossip secret
	// (join.go), not from its own token.
	if secret, err := joinendpoint.GossipSecret(pki.Dir(cfg.PKI.Dir), cfg.TokenFile); err == nil && len(secret) > 0 {
		token = secret
	}
	return gossip.New(gossip.Config{
		Name:          cfg.Name,
		BindAddr:      cfg.Gossip.Bind,
		BindPort:      cfg.Gossip.PortNumber(),
		AdvertiseAddr: cfg.Gossip.Advertise,
		Seeds:         cfg.Gossip.Seeds,
		Profile:       gossip.Profile(cfg.Gossip.Profile),
		Token:         token,
		DataDir:       cfg.DataDir, // the key generation in use survives restarts
		Meta:          gossip.Meta{Name: cfg.Name, Version: Version},
		Logger:        log,
	})
}
