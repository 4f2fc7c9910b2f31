package agent

import (
	"github.com/homystack/nico/pkg/controller"
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

// hypervisorController is the host's domain controller, run in the node's
// group (agent/controllers.go); nil without the hypervisor role.
func (a *Agent) hypervisorController() controller.Controller {
	if a.cfg.Hypervisor == nil {
		return nil
	}
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
	c.clock, c.Now = a.cfg.Clock, a.cfg.Clock.Now
	return c.Controller()
}
