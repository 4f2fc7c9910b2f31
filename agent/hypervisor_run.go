package agent

import (
	"github.com/homystack/nico/agent/hypervisor"
	"github.com/homystack/nico/pkg/controller"
)

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
		cfg.Endpoints = a.client().Endpoints()
	}
	cfg.Clock = a.cfg.Clock
	return hypervisor.New(cfg, a.store(), a.cfg.Hypervisor.HV, a.log).Controller()
}
