package hypervisor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/hypervisor"
	"github.com/homystack/nico/pkg/store"
)

// writeStatus records each machine's domain state, whether its node is
// registered (discoverable) and whether it has a desired NixOS configuration;
// a machine changed by someone else since it was read is left to the next
// pass.
func (c *Controller) writeStatus(ctx context.Context, machines []*api.Machine, domains []hypervisor.Domain, failed map[string]error, registered map[string]bool) error {
	byUUID := map[string]hypervisor.Domain{}
	for _, d := range domains {
		byUUID[d.Spec.UUID] = d
	}
	configured, err := c.st.Names(ctx, store.NixosConfigsDir)
	if err != nil {
		return fmt.Errorf("agent: configurations: %w", err)
	}
	var errs []error
	for _, m := range machines {
		now := c.Now()
		st := observedStatus(m, byUUID, failed[m.Spec.UUID], registered[m.Metadata.Name], now)
		c.setBooted(&st, m, byUUID, now)
		st.HasConfiguration = configured[m.Metadata.Name]
		if sameMachineStatus(st, m.Status) {
			continue
		}
		nm := *m
		nm.Status = st
		if err := c.st.Update(ctx, store.MachineKey(m.Metadata.Name), &nm); err != nil && !errors.Is(err, store.ErrConflict) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// observedStatus is a machine's status from its domain.
func observedStatus(m *api.Machine, domains map[string]hypervisor.Domain, failure error, registered bool, now time.Time) api.MachineStatus {
	st := m.Status
	st.Conditions = slices.Clone(m.Status.Conditions)
	st.Discoverable = registered
	d, exists := domains[m.Spec.UUID]
	switch {
	case m.Spec.Deleting && !exists:
		st.Phase, st.DomainState, st.Addresses = api.MachineDeleted, "", nil
	case m.Spec.Deleting:
		st.Phase, st.DomainState = api.MachineDeleting, string(d.State)
	case !exists:
		st.Phase, st.DomainState, st.Addresses = api.MachineProvisioning, "", nil
	case d.State == hypervisor.Running:
		st.Phase, st.DomainState, st.Addresses = api.MachineRunning, string(d.State), d.Addresses
	default:
		st.Phase, st.DomainState, st.Addresses = api.MachineStopped, string(d.State), nil
	}
	c := api.Condition{Type: api.CondProvisioned, Status: exists && failure == nil, Since: now}
	switch {
	case failure != nil:
		c.Reason, c.Message = failureReason(failure), failure.Error()
		if !exists {
			st.Phase = api.MachineFailed
		}
	case exists:
		c.Reason = "DomainDefined"
	default:
		c.Reason = "NotDefined"
	}
	st.Conditions, _ = api.SetCondition(st.Conditions, c)
	st.UpdatedAt = m.Status.UpdatedAt
	if !sameMachineStatus(st, m.Status) {
		st.UpdatedAt = now
	}
	return st
}

// setBooted sets st's Booted condition from what m's running domain showed
// of its boot, and drops it when the domain does not run.
func (c *Controller) setBooted(st *api.MachineStatus, m *api.Machine, domains map[string]hypervisor.Domain, now time.Time) {
	d, ok := domains[m.Spec.UUID]
	var w *bootWatch
	if ok && d.State == hypervisor.Running && !m.Spec.Deleting {
		w = c.boots[m.Spec.UUID]
		if w == nil { // started in this pass and not yet seen
			w = &bootWatch{since: now}
		}
	}
	cond, ok := bootCondition(w, d.Spec.Type, c.cfg.BootTimeout, now)
	if !ok {
		st.Conditions = slices.DeleteFunc(st.Conditions, func(x api.Condition) bool { return x.Type == api.CondBooted })
	} else {
		st.Conditions, _ = api.SetCondition(st.Conditions, cond)
	}
	if !sameMachineStatus(*st, m.Status) {
		st.UpdatedAt = now
	}
}

func failureReason(err error) string {
	for _, s := range []struct {
		err    error
		reason string
	}{
		{hypervisor.ErrNoNetwork, "UnknownNetwork"}, {hypervisor.ErrNoImage, "UnknownImage"}, {hypervisor.ErrNoStoragePool, "UnknownStoragePool"},
		{hypervisor.ErrNameTaken, "NameTaken"}, {hypervisor.ErrUnsupported, "Unsupported"},
	} {
		if errors.Is(err, s.err) {
			return s.reason
		}
	}
	return "Failed"
}

func sameMachineStatus(a, b api.MachineStatus) bool {
	return a.Phase == b.Phase && a.Discoverable == b.Discoverable && a.HasConfiguration == b.HasConfiguration &&
		a.DomainState == b.DomainState && slices.Equal(a.Addresses, b.Addresses) &&
		slices.EqualFunc(a.Conditions, b.Conditions, func(x, y api.Condition) bool {
			return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message
		})
}
