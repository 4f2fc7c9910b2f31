package hypervisor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/hypervisor"
)

// Settings of Config.DomainType (hypervisor.domainType).
const (
	// DomainTypeAuto: kvm when the host offers it (libvirt's capabilities:
	// qemu can use /dev/kvm) and no kvm guest of this host failed to boot
	// since the agent started; else qemu.
	DomainTypeAuto = "auto"
	// DomainTypeKVM: always kvm (a host without it fails to define).
	DomainTypeKVM = hypervisor.TypeKVM
	// DomainTypeQEMU: always software emulation.
	DomainTypeQEMU = hypervisor.TypeQEMU
)

// Reasons of the Booted condition of a running machine.
const (
	reasonBooted     = "Booted"
	reasonBooting    = "Booting"
	reasonNotBooting = "NotBooting"
)

// consoleBootBytes is how much console output shows a guest booted: more
// than the firmware's and the kernel's real-mode lines ("Booting from
// ROM...", "Probing EDD", under 100 bytes), which a guest that hangs next
// still writes; a kernel with console=ttyS0 writes kilobytes at once.
const consoleBootBytes = 1024

// chooseDomainType is the type of the domains defined from now on, and
// why, for the setting, the types the host offers and, in auto, the kvm
// guest that did not boot (empty: none did).
func chooseDomainType(setting string, offered []string, kvmFailure string) (typ, why string) {
	switch setting {
	case DomainTypeKVM:
		if !slices.Contains(offered, hypervisor.TypeKVM) {
			return hypervisor.TypeKVM, fmt.Sprintf("hypervisor.domainType is kvm, but this host offers only %v: domains cannot be defined", offered)
		}
		return hypervisor.TypeKVM, "hypervisor.domainType is kvm"
	case DomainTypeQEMU:
		return hypervisor.TypeQEMU, "hypervisor.domainType is qemu"
	}
	hasKVM, hasQEMU := slices.Contains(offered, hypervisor.TypeKVM), slices.Contains(offered, hypervisor.TypeQEMU)
	switch {
	case hasKVM && kvmFailure == "":
		return hypervisor.TypeKVM, "auto: libvirt offers kvm (qemu can use /dev/kvm)"
	case hasKVM:
		return hypervisor.TypeQEMU, "auto: libvirt offers kvm, but " + kvmFailure + "; software emulation (qemu) until the agent restarts"
	case hasQEMU:
		return hypervisor.TypeQEMU, "auto: libvirt does not offer kvm (no /dev/kvm that qemu can use); software emulation (qemu)"
	case len(offered) > 0:
		return offered[0], "auto: the host offers " + offered[0]
	}
	return "", "auto: the host reports no domain type; libvirt's default"
}

// bootWatch is what the controller saw of a running domain's boot.
type bootWatch struct {
	since time.Time // started, or first seen running
	// sign is the first sign that the guest booted ("" none yet).
	sign string
	// consoleKnown: the console could be read (and held less than
	// consoleBootBytes).
	consoleKnown bool
	// stuck: no sign within the boot timeout.
	stuck bool
	// note says why the domain was last started, when it matters.
	note string
}

// observeBoots looks for a sign of boot in each running domain that showed
// none yet: its node registered, an address, console output. It returns
// the domains without one after the boot timeout. In auto, a kvm domain of
// a machine placed here (declared: not deleting) without one makes the host
// fall back to qemu (kvmFailure).
func (c *Controller) observeBoots(ctx context.Context, domains []hypervisor.Domain, declared, registered map[string]bool, now time.Time) (map[string]bool, error) {
	stuck := map[string]bool{}
	live := map[string]bool{}
	for _, d := range domains {
		u := d.Spec.UUID
		if d.State != hypervisor.Running {
			continue
		}
		live[u] = true
		w := c.boots[u]
		if w == nil {
			w = &bootWatch{since: now}
			c.boots[u] = w
		}
		if w.sign != "" {
			continue
		}
		switch {
		case registered[d.Spec.Name]:
			w.sign = "its node registered"
		case len(d.Addresses) > 0:
			w.sign = "an address (" + d.Addresses[0] + ")"
		default:
			n, err := c.hv.ConsoleBytes(ctx, u)
			switch {
			case errors.Is(err, hypervisor.ErrUnavailable):
				return nil, fmt.Errorf("agent: console of %s: %w", d.Spec.Name, err)
			case err == nil && n >= consoleBootBytes:
				w.sign = fmt.Sprintf("console output (%d bytes)", n)
			case err != nil && !errors.Is(err, hypervisor.ErrUnsupported):
				c.log.Debug("console unreadable", "machine", d.Spec.Name, "err", err)
			}
			w.consoleKnown = err == nil
		}
		if w.sign != "" || now.Sub(w.since) < c.cfg.BootTimeout {
			continue
		}
		stuck[u] = true
		if !w.stuck {
			w.stuck = true
			c.log.Warn("domain runs but its guest shows no sign of booting", "machine", d.Spec.Name, "uuid", u, "domainType", d.Spec.Type,
				"for", c.cfg.BootTimeout, "consoleRead", w.consoleKnown)
		}
		if c.cfg.DomainType == DomainTypeAuto && d.Spec.Type == hypervisor.TypeKVM && c.kvmFailure == "" && declared[u] {
			c.kvmFailure = fmt.Sprintf("machine %s showed no sign of booting under kvm within %v", d.Spec.Name, c.cfg.BootTimeout)
			c.log.Warn("kvm guests do not boot on this host; its domains use software emulation (qemu) from now on", "machine", d.Spec.Name)
		}
	}
	for u := range c.boots {
		if !live[u] {
			delete(c.boots, u)
		}
	}
	return stuck, nil
}

// bootStarted records that the controller (re)started a's domain.
func (c *Controller) bootStarted(a domainAction, now time.Time) {
	w := &bootWatch{since: now}
	if slices.Contains(a.Why, whyDomainType) {
		w.note = fmt.Sprintf("; redefined as %s, as under %s its guest showed no sign of booting within %v", a.Spec.Type, a.From, c.cfg.BootTimeout)
	}
	c.boots[a.UUID] = w
}

// bootCondition is the Booted condition of a running domain of type typ
// (w nil: not running, no condition).
func bootCondition(w *bootWatch, typ string, timeout time.Duration, now time.Time) (api.Condition, bool) {
	if w == nil {
		return api.Condition{}, false
	}
	c := api.Condition{Type: api.CondBooted, Since: now}
	switch {
	case w.sign != "":
		c.Status, c.Reason, c.Message = true, reasonBooted, "the guest showed "+w.sign
	case w.stuck:
		seen := fmt.Sprintf("under %d bytes of console output, no address and no node registered", consoleBootBytes)
		if !w.consoleKnown {
			seen = "no address and no node registered (its console cannot be read here)"
		}
		hint := "; check its image, kernel and cmdline"
		if typ == hypervisor.TypeKVM {
			hint = "; if this host's KVM cannot run guests (nested or paravirtualized KVM), set hypervisor.domainType to auto or qemu"
		}
		c.Reason = reasonNotBooting
		c.Message = fmt.Sprintf("the domain (type %s) has run for %v with %s: its guest is not booting%s", typ, timeout, seen, hint)
	default:
		c.Reason = reasonBooting
		c.Message = fmt.Sprintf("waiting for console output, an address or the node to register (at most %v)%s", timeout, w.note)
	}
	return c, true
}
