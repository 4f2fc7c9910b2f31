package hypervisor

import (
	"cmp"
	"slices"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/hypervisor"
)

// domainAction is what the host does to one domain, keyed by UUID.
//
//	machine, no domain ------------------> Create  (define, start)
//	domain differs in what nico owns ----> Restart (stop, define, start) or, stopped, Create
//	domain stopped ----------------------> Start
//	running, no sign of boot, of another
//	type than the host now defines ------> Restart (redefined as that type)
//	machine Deleting, domain exists -----> Delete  (stop gracefully, undefine with volumes)
//	nico domain, no machine on this host > Delete
//	otherwise ---------------------------> nothing (a running domain is never touched)
type domainAction struct {
	Kind    actionKind
	UUID    string
	Machine *api.Machine // nil for an undeclared domain
	Spec    hypervisor.DomainSpec
	// Why names the owned fields that differ, for Restart (whyDomainType:
	// a domain that does not boot, redefined as the type chosen now).
	Why []string
	// From is the domain's type before a Restart for whyDomainType.
	From string
}

// whyDomainType is the Why of a domain redefined as another type.
const whyDomainType = "domainType"

type actionKind string

const (
	actCreate  actionKind = "create"
	actStart   actionKind = "start"
	actRestart actionKind = "restart"
	actDelete  actionKind = "delete"
)

// planDomains compares the machines placed on this host with the nico
// domains it runs. It is pure: spec builds a machine's domain spec; stuck
// holds the running domains whose guest showed no sign of booting in time.
func planDomains(machines []*api.Machine, domains []hypervisor.Domain, spec func(*api.Machine) hypervisor.DomainSpec, stuck map[string]bool) []domainAction {
	byUUID := map[string]hypervisor.Domain{}
	for _, d := range domains {
		byUUID[d.Spec.UUID] = d
	}
	declared := map[string]bool{}
	var out []domainAction
	for _, m := range machines {
		if m.Spec.UUID == "" {
			continue
		}
		declared[m.Spec.UUID] = true
		d, exists := byUUID[m.Spec.UUID]
		if m.Spec.Deleting {
			if exists {
				out = append(out, domainAction{Kind: actDelete, UUID: m.Spec.UUID, Machine: m})
			}
			continue
		}
		want := spec(m)
		switch {
		case !exists:
			out = append(out, domainAction{Kind: actCreate, UUID: m.Spec.UUID, Machine: m, Spec: want})
		case stuck[m.Spec.UUID] && want.Type != "" && want.Type != d.Spec.Type:
			out = append(out, domainAction{Kind: actRestart, UUID: m.Spec.UUID, Machine: m, Spec: want, Why: []string{whyDomainType}, From: d.Spec.Type})
		case len(want.Differs(d.Spec)) > 0 && d.State == hypervisor.Shutoff:
			out = append(out, domainAction{Kind: actCreate, UUID: m.Spec.UUID, Machine: m, Spec: want, Why: want.Differs(d.Spec)})
		case len(want.Differs(d.Spec)) > 0:
			out = append(out, domainAction{Kind: actRestart, UUID: m.Spec.UUID, Machine: m, Spec: want, Why: want.Differs(d.Spec)})
		case d.State == hypervisor.Shutoff || d.State == hypervisor.Crashed:
			out = append(out, domainAction{Kind: actStart, UUID: m.Spec.UUID, Machine: m, Spec: want})
		}
	}
	for _, d := range domains {
		if !declared[d.Spec.UUID] {
			out = append(out, domainAction{Kind: actDelete, UUID: d.Spec.UUID, Spec: d.Spec})
		}
	}
	slices.SortStableFunc(out, func(a, b domainAction) int {
		// Deletions first: they free room for what is created.
		return cmp.Compare(rank(a.Kind), rank(b.Kind))
	})
	return out
}

func rank(k actionKind) int {
	if k == actDelete {
		return 0
	}
	return 1
}
