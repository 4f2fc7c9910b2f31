package main

import (
	"log/slog"
	"maps"
	"net"
	"os"
	"strconv"

	"github.com/homystack/nico/agent/hypervisor"
	"github.com/homystack/nico/agent/internal/firstboot"
	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/libvirt"
)

// newHypervisor returns the libvirt domain controller's setup of a host with
// the hypervisor role (nil otherwise), and what closes its connection.
func newHypervisor(cfg config.Agent, log *slog.Logger) (*hypervisor.Setup, func()) {
	if !cfg.HasRole(config.RoleHypervisor) {
		return nil, func() {}
	}
	hv := libvirt.New(cfg.Hypervisor.URI, log)
	hc := hypervisor.Config{
		Labels: cfg.Hypervisor.LabelMap(), StopGrace: cfg.Hypervisor.StopGrace, Resync: cfg.Hypervisor.Resync,
		DomainType: cfg.Hypervisor.DomainType, BootTimeout: cfg.Hypervisor.BootTimeout,
	}
	hc.Seeds, hc.Token = guestMesh(cfg)
	return &hypervisor.Setup{HV: hv, Config: hc}, func() { _ = hv.Close() }
}

// guestMesh is what a new VM is handed to join the gossip mesh: this host's
// advertised gossip address (guests are on its networks) and its seeds, and
// the token (hypervisor.guestTokenFile's, else tokenFile's). Without a mesh
// it is nothing, and VMs get etcd endpoints instead.
func guestMesh(cfg config.Agent) (seeds []string, token string) {
	if !cfg.Gossip.Enabled(cfg.TokenFile) || cfg.TokenFile == "" {
		return nil, ""
	}
	file := cfg.TokenFile
	if cfg.Hypervisor.GuestTokenFile != "" {
		file = cfg.Hypervisor.GuestTokenFile
	}
	b, err := config.ReadToken(file)
	if err != nil {
		return nil, ""
	}
	addr := cfg.Gossip.Advertise
	if addr == "" && cfg.Gossip.Bind != "0.0.0.0" && cfg.Gossip.Bind != "::" {
		addr = cfg.Gossip.Bind
	}
	if addr != "" {
		seeds = append(seeds, net.JoinHostPort(addr, strconv.Itoa(cfg.Gossip.PortNumber())))
	}
	return append(seeds, cfg.Gossip.Seeds...), string(b)
}

// firstBootEnv turns a VM's first-boot identity (systemd credentials nico.*
// or SMBIOS OEM strings, handed by its hypervisor host) into the NICO_*
// variables that are not set already: name, etcd.endpoints, gossip.seeds,
// roles, store.prefix, tokenFile (the token in a 0600 file), and on a
// control-plane VM etcd.peerURL and etcd.clientURL on the address it
// reaches the cluster from (firstboot.MemberEnv). A machine without such
// an identity is unaffected.
func firstBootEnv() error {
	id, err := firstboot.Read(os.Getenv("CREDENTIALS_DIRECTORY"), firstboot.DMIEntries)
	if err != nil {
		return nil
	}
	env := firstboot.Env(id)
	if os.Getenv("NICO_ETCD_PEERURL") == "" || os.Getenv("NICO_ETCD_CLIENTURL") == "" {
		urls, err := firstboot.MemberEnv(id, firstboot.RouteAddr)
		if err != nil {
			return err
		}
		maps.Copy(env, urls)
	}
	if p, err := firstboot.TokenFile(id, os.Getenv("CREDENTIALS_DIRECTORY"), firstBootRunDir); err == nil && p != "" {
		env["NICO_TOKENFILE"] = p
	}
	for k, v := range env {
		if os.Getenv(k) == "" {
			_ = os.Setenv(k, v)
		}
	}
	return nil
}

// firstBootRunDir holds the token file written from SMBIOS strings.
const firstBootRunDir = "/run/nico/firstboot"
