package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/objectapply"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/pflag"
)

// applyObjects applies the manifest of the flake's objects (objects.file)
// on a control-plane host: nico-objects.service runs it once the agent is
// ready, when the agent starts again and after a switch that changes the
// manifest, and fails when it is refused. Exit codes: 0 applied (or superseded
// by a newer manifest), 2 refused (nothing written) or bad usage, 1 etcd
// could not be reached or written.
func applyObjects(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("nico-agent apply-objects", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	config.AgentFlags(fs)
	timeout := fs.Duration("timeout", 2*time.Minute, "how long the apply may take")
	setUsage(fs, stderr)
	if err := fs.Parse(args); err != nil {
		return usageError(stderr, "%s", err)
	}
	cfg, err := config.LoadAgent(fs)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if cfg.Objects.File == "" {
		fmt.Fprintln(stdout, "apply-objects: objects.file is empty: the flake declares no objects")
		return 0
	}
	if !cfg.HasRole(config.RoleControlPlane) {
		fmt.Fprintln(stdout, "apply-objects: not a control-plane machine; its control-plane hosts apply the flake's objects")
		return 0
	}
	eps := append([]string{cfg.Etcd.ClientURL}, cfg.Etcd.Endpoints...)
	d := pki.Dir(cfg.PKI.Dir)
	tlsCfg, err := etcdclient.Files{CA: d.CACert(), Cert: d.Cert(pki.NodeLeaf), Key: d.Key(pki.NodeLeaf)}.Load(eps)
	if err != nil {
		fmt.Fprintf(stderr, "apply-objects: %v\n", err)
		return 1
	}
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: eps, DialTimeout: cfg.Etcd.DialTimeout, TLS: tlsCfg})
	if err != nil {
		fmt.Fprintf(stderr, "apply-objects: cannot reach etcd at %v: %v\n", eps, err)
		return 1
	}
	defer cli.Close()
	st, err := store.New(cli, cfg.Store.Prefix)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	c := &objectapply.Cluster{Store: st, Client: cli, Health: cfg.Etcd.DialTimeout}
	res, err := c.ApplyFile(ctx, cfg.Objects.File, cfg.Name)
	var invalid *objectapply.InvalidError
	var refused *objectapply.RefusedError
	switch {
	case errors.As(err, &invalid) || errors.As(err, &refused):
		fmt.Fprintf(stderr, "apply-objects: %s refused, nothing written:\n%v\n", cfg.Objects.File, err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "apply-objects: %v\n", err)
		return 1
	}
	if res.Decision.Verdict == objectapply.Superseded {
		fmt.Fprintf(stdout, "apply-objects: not applied: %s\n", res.Decision.Reason)
		return 0
	}
	fmt.Fprintf(stdout, "apply-objects: %s\n", res.Decision.Reason)
	for _, m := range res.Messages {
		fmt.Fprintln(stdout, m)
	}
	return 0
}
