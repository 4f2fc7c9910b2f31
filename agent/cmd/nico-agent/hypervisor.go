package main

import (
	"log/slog"
	"os"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/firstboot"
	"github.com/homystack/nico/pkg/libvirt"
)

// newHypervisor returns the libvirt domain controller's setup of a host with
// the hypervisor role (nil otherwise), and what closes its connection.
func newHypervisor(cfg config.Agent, log *slog.Logger) (*agent.HypervisorSetup, func()) {
	if !cfg.HasRole(config.RoleHypervisor) {
		return nil, func() {}
	}
	hv := libvirt.New(cfg.Hypervisor.URI, log)
	return &agent.HypervisorSetup{HV: hv, Config: agent.HypervisorConfig{
		Labels: cfg.Hypervisor.LabelMap(), StopGrace: cfg.Hypervisor.StopGrace, Resync: cfg.Hypervisor.Resync,
	}}, func() { _ = hv.Close() }
}

// firstBootEnv turns a VM's first-boot identity (systemd credentials nico.*
// or SMBIOS OEM strings, handed by its hypervisor host) into the NICO_*
// variables that are not set already: name, etcd.endpoints, roles,
// store.prefix. A machine without such an identity is unaffected.
func firstBootEnv() {
	id, err := firstboot.Read(os.Getenv("CREDENTIALS_DIRECTORY"), firstboot.DMIEntries)
	if err != nil {
		return
	}
	for k, v := range firstboot.Env(id) {
		if os.Getenv(k) == "" {
			_ = os.Setenv(k, v)
		}
	}
}
