package config

import (
	"fmt"
	"strings"
	"time"
)

// RoleHypervisor is the role of a machine whose agent runs libvirt VMs for
// machine pools.
const RoleHypervisor = "hypervisor"

// Hypervisor is how a hypervisor host's agent reaches libvirt.
type Hypervisor struct {
	URI       string        // "hypervisor.uri": libvirt connection URI
	Labels    []string      // "hypervisor.labels": key=value pairs that pools' hostSelector matches
	StopGrace time.Duration // "hypervisor.stopGrace": guest shutdown before destroy
	Resync    time.Duration // "hypervisor.resync": re-read everything this often
	// GuestTokenFile ("hypervisor.guestTokenFile") holds the token handed to
	// this host's VMs at first boot; empty: tokenFile's. A join token that
	// allows only the roles VMs get (nicoctl token create) keeps the host's
	// own token on the host.
	GuestTokenFile string
	// DomainType ("hypervisor.domainType") is the type of the domains the
	// host defines: auto (kvm where libvirt offers it and kvm guests boot,
	// else qemu), kvm, or qemu (software emulation).
	DomainType string
	// BootTimeout ("hypervisor.bootTimeout") is how long a running domain
	// may show no sign of booting before its machine reports NotBooting.
	BootTimeout time.Duration
}

// Accepted values of hypervisor.domainType.
const (
	DomainTypeAuto = "auto"
	DomainTypeKVM  = "kvm"
	DomainTypeQEMU = "qemu"
)

// LabelMap returns the labels as a map.
func (h Hypervisor) LabelMap() map[string]string { return labelMap(h.Labels) }

// labelMap maps key=value labels.
func labelMap(labels []string) map[string]string {
	m := map[string]string{}
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		m[k] = v
	}
	return m
}

// hypervisorKeys are the agent's hypervisor.* keys, bound to h.
func hypervisorKeys(h *Hypervisor) []key {
	return []key{
		stringKey("hypervisor.uri", &h.URI, "qemu:///system", "libvirt connection URI of a host with the hypervisor role", notEmpty),
		listKey("hypervisor.labels", &h.Labels, nil, "labels of this hypervisor host, key=value, matched by machine pools' hostSelector", each(label), noDuplicates),
		durationKey("hypervisor.stopGrace", &h.StopGrace, 30*time.Second, "how long a guest may take to shut down before its domain is destroyed", between(0, 10*time.Minute, false)),
		stringKey("hypervisor.guestTokenFile", &h.GuestTokenFile, "", "file holding the token handed to this host's VMs at first boot (SMBIOS), e.g. a join token for role worker only; empty means tokenFile's", readableFile(true)),
		durationKey("hypervisor.resync", &h.Resync, 5*time.Second, "how often the hypervisor host re-reads its domains besides watch events", between(100*time.Millisecond, 10*time.Minute, false)),
		stringKey("hypervisor.domainType", &h.DomainType, DomainTypeAuto, "type of the domains this host defines: auto (kvm where libvirt offers it, until a kvm guest shows no sign of booting; else qemu), kvm, or qemu (software emulation)", oneOf(DomainTypeAuto, DomainTypeKVM, DomainTypeQEMU)),
		durationKey("hypervisor.bootTimeout", &h.BootTimeout, 5*time.Minute, "how long a running domain may show no sign of booting (console output, an address, its node registered) before its machine reports Booted false, NotBooting", between(10*time.Second, time.Hour, false)),
	}
}

// label accepts key=value with a non-empty key.
func label(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("%q is not accepted; use key=value, e.g. rack=a", v)
	}
	return nil
}
