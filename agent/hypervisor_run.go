package agent

import (
	"context"

	"github.com/homystack/nico/pkg/hypervisor"
)

// HypervisorSetup runs a hypervisor host's domain controller inside the
// agent, once the node is registered, on the agent's store client.
type HypervisorSetup struct {
	HV hypervisor.Hypervisor
	// Config tunes the controller; Node, Prefix and Endpoints default to the
	// agent's (Endpoints to the ones the agent reached the cluster with).
	Config HypervisorConfig
}

// startHypervisor runs the controller until the returned stop is called.
func (a *Agent) startHypervisor(ctx context.Context) (stop func()) {
	cfg := a.cfg.Hypervisor.Config
	if cfg.Node == "" {
		cfg.Node = a.cfg.Name
	}
	if cfg.Prefix == "" {
		cfg.Prefix = a.cfg.Prefix
	}
	if len(cfg.Endpoints) == 0 {
		cfg.Endpoints = a.cli.Endpoints()
	}
	c := NewHypervisorController(cfg, a.st, a.cfg.Hypervisor.HV, a.log)
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(hctx) }()
	return func() { cancel(); <-done }
}
