package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/requests"
	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/pflag"
)

// leave asks the coordinator to remove this node's member safely and waits
// for the answer; the running agent then wipes its data and stops.
func leave(args []string, stderr io.Writer) int {
	fs := pflag.NewFlagSet("nico-agent leave", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	config.AgentFlags(fs)
	force := fs.Bool("force", false, "remove even if the quorum projection says it is unsafe")
	timeout := fs.Duration("wait", 5*time.Minute, "how long to wait for the coordinator's answer")
	setUsage(fs, stderr)
	if err := fs.Parse(args); err != nil {
		return usageError(stderr, "%s", err)
	}
	cfg, err := config.LoadAgent(fs)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	st, closeStore, err := nodeStore(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "leave: %v\n", err)
		return 2
	}
	defer closeStore()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if _, err := requests.RequestRemoval(ctx, st, cfg.Name, *force, "nico-agent leave"); err != nil {
		fmt.Fprintf(stderr, "leave: %v\n", err)
		return 1
	}
	r, err := requests.WaitRemoval(ctx, st, cfg.Name, func(r *api.RemoveRequest) {
		fmt.Fprintf(stderr, "leave %s: %s %s\n", cfg.Name, r.Status.Phase, r.Status.Message)
	})
	switch {
	case errors.Is(err, requests.ErrRefused):
		fmt.Fprintf(stderr, "leave refused: %v\n", err)
		return 3
	case err != nil:
		fmt.Fprintf(stderr, "leave: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "node %s left the cluster (%s)\n", cfg.Name, r.Status.Operation)
	return 0
}

// nodeStore connects to nico's store as this node (its node certificate),
// through the local member's client URL and etcd.endpoints.
func nodeStore(cfg config.Agent) (*store.Store, func(), error) {
	eps := append([]string{cfg.Etcd.ClientURL}, cfg.Etcd.Endpoints...)
	d := pki.Dir(cfg.PKI.Dir)
	tlsCfg, err := etcdclient.Files{CA: d.CACert(), Cert: d.Cert(pki.NodeLeaf), Key: d.Key(pki.NodeLeaf)}.Load(eps)
	if err != nil {
		return nil, nil, err
	}
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: eps, DialTimeout: cfg.Etcd.DialTimeout, TLS: tlsCfg})
	if err != nil {
		return nil, nil, fmt.Errorf("cannot reach etcd at %v: %w", eps, err)
	}
	st, err := store.New(cli, cfg.Store.Prefix)
	if err != nil {
		cli.Close()
		return nil, nil, err
	}
	return st, func() { cli.Close() }, nil
}
