package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/enroll"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
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
	// On a machine that joined, the cluster's gossip secret is beside its
	// CA certificate (package enroll), and its token is not that secret.
	if secret, err := os.ReadFile(enroll.GossipSecretFile(pki.Dir(filepath.Dir(cfg.TLS.CAFile)))); err == nil && len(secret) > 0 {
		token = secret
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

// nodePeers names the gossip addresses the store's node records publish:
// where the candidate's member rejoins when it is alone and its seeds are
// gone (gossip.PeerSource).
func nodePeers(st *store.Store) gossip.PeerSource {
	return func(ctx context.Context) ([]string, error) {
		nodes, _, err := store.List[api.Node](ctx, st, store.NodesDir)
		if err != nil {
			return nil, fmt.Errorf("nico-coordinator: reading node records for gossip peers: %w", err)
		}
		return api.GossipPeers(nodes, ""), nil
	}
}
