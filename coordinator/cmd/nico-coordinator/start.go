package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/sdnotify"
)

// What the coordinator waits for before it can campaign, and how it keeps
// systemd from timing its start out meanwhile.
const (
	// identityPoll is how often the identity files are looked for.
	identityPoll = time.Second
	// startExtendEvery and startExtendBy pace EXTEND_TIMEOUT_USEC while it
	// waits for its identity or the etcd endpoints.
	startExtendEvery = 20 * time.Second
	startExtendBy    = 60 * time.Second
)

// awaitIdentity waits until the coordinator's TLS files (tls.caFile,
// tls.certFile, tls.keyFile) exist: on a machine that joins, the agent
// writes pki/coordinator.crt only once its join brought the machine's
// certificates, and the coordinator may start before that. It returns
// ctx's error when ctx ends first.
func awaitIdentity(ctx context.Context, cfg config.Coordinator, poll time.Duration, log *slog.Logger) error {
	files := []string{cfg.TLS.CAFile, cfg.TLS.CertFile, cfg.TLS.KeyFile}
	missing := func() []string {
		var out []string
		for _, f := range files {
			if _, err := os.Stat(f); errors.Is(err, os.ErrNotExist) {
				out = append(out, f)
			}
		}
		return out
	}
	m := missing()
	if len(m) == 0 {
		return nil
	}
	log.Info("waiting for this machine's coordinator identity: the agent writes it once the machine has joined the cluster", "missing", m)
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if len(missing()) == 0 {
			log.Info("coordinator identity found", "certFile", cfg.TLS.CertFile)
			return nil
		}
	}
}

// etcdEndpoints are etcd.endpoints, or, when there are none, the client
// URLs of the voters the mesh names, as the agent learns them.
func etcdEndpoints(ctx context.Context, cfg config.Coordinator, mesh gossip.NodeWatcher, log *slog.Logger) ([]string, error) {
	if len(cfg.Etcd.Endpoints) > 0 {
		return cfg.Etcd.Endpoints, nil
	}
	if mesh == nil {
		return nil, errors.New("nico-coordinator: no etcd endpoint: set etcd.endpoints, or gossip.seeds to learn them from the mesh")
	}
	eps, err := gossip.AwaitEtcdEndpoints(ctx, mesh, gossip.Discovery{Waiting: func() {
		log.Info("waiting for the gossip mesh to name etcd voters")
	}})
	if err != nil {
		return nil, fmt.Errorf("nico-coordinator: discovering etcd through gossip: %w", err)
	}
	log.Info("etcd endpoints learned from gossip", "endpoints", eps)
	return eps, nil
}

// extendStart asks systemd for more start time every startExtendEvery
// (well within its default 90 s start timeout) until stop is called: the coordinator waits for its identity or the
// mesh, which the agent brings.
func extendStart(ctx context.Context, n *sdnotify.Notifier) (stop func()) {
	if !n.Enabled() {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(startExtendEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			_ = n.ExtendTimeout(startExtendBy)
		}
	}()
	return func() { cancel(); <-done }
}
