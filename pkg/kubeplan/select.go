package kubeplan

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Group is how a cluster names the machines of one part (control plane or
// data plane): an explicit list, which takes precedence, else up to Count
// machines whose labels include MatchLabels.
type Group struct {
	Machines    []string
	MatchLabels map[string]string
	Count       int
	// Claim is the plane's MachineClaim ("" none): the machines it asked
	// a pool for are the plane's first, whatever their labels.
	Claim string
	// ClaimOnly takes no free machine but the claim's (a plane with a
	// machine pool and no selector).
	ClaimOnly bool
}

// Machine is one machine of the fleet as the controller observed it.
type Machine struct {
	Name   string
	Labels map[string]string
	// Discoverable: its agent has registered its node.
	Discoverable bool
	// Replace: a VM a claim asked for, dead past replaceDeadMembersAfter.
	// A selector lets it go (its claim asks for a fresh VM); a named
	// machine is kept.
	Replace bool
	// HasConfiguration: it has a desired configuration that is not the
	// cluster's own.
	HasConfiguration bool
	// ClaimedBy is the cluster that holds it ("" none).
	ClaimedBy string
	// Claim is the MachineClaim that asked a pool for it ("" none): it is
	// free only to the group of that claim.
	Claim string
	// Addresses are the machine's addresses, in its own order.
	Addresses []string
}

// Selection is which machines a cluster holds, and what it lacks.
type Selection struct {
	ControlPlane, DataPlane []string
	// MissingControlPlane and MissingDataPlane count the machines a
	// selector asks for and the fleet cannot give yet.
	MissingControlPlane, MissingDataPlane int
	// Unknown are named machines that do not exist.
	Unknown []string
	// Held are named machines another cluster holds.
	Held []string
}

// Missing is how many machines the cluster waits for.
func (s Selection) Missing() int {
	return s.MissingControlPlane + s.MissingDataPlane + len(s.Held)
}

// All returns the selected machines, control plane first.
func (s Selection) All() []string {
	return append(slices.Clone(s.ControlPlane), s.DataPlane...)
}

// Select chooses cluster's machines. A named machine is taken as it is
// (its existence checked, not its state) unless another cluster holds it.
// A selector keeps the matching machines the cluster already holds, in
// name order, then adds free ones: discoverable, with no configuration,
// held by nobody, in name order, up to its count; the machines the
// group's claim asked a pool for come before the others, and a machine
// another claim asked for is never taken. The control plane is
// chosen first; a machine is never in both parts.
func Select(cluster string, cp, dp Group, machines []Machine) Selection {
	byName := make(map[string]Machine, len(machines))
	for _, m := range machines {
		byName[m.Name] = m
	}
	names := slices.Sorted(maps.Keys(byName))
	slices.SortStableFunc(names, natural)
	var s Selection
	used := map[string]bool{}
	s.ControlPlane, s.MissingControlPlane = selectGroup(cluster, cp, byName, names, used, &s)
	s.DataPlane, s.MissingDataPlane = selectGroup(cluster, dp, byName, names, used, &s)
	return s
}

func selectGroup(cluster string, g Group, byName map[string]Machine, names []string, used map[string]bool, s *Selection) ([]string, int) {
	var out []string
	if len(g.Machines) > 0 {
		for _, name := range g.Machines {
			m, ok := byName[name]
			switch {
			case used[name]:
				continue
			case !ok:
				s.Unknown = append(s.Unknown, name)
				continue
			case m.ClaimedBy != "" && m.ClaimedBy != cluster:
				s.Held = append(s.Held, name)
				continue
			}
			used[name] = true
			out = append(out, name)
		}
		return out, 0
	}
	if g.Count <= 0 {
		return nil, 0
	}
	take := func(ok func(Machine) bool) {
		for _, name := range names {
			m := byName[name]
			// A machine a claim asked a pool for is its claim's group's
			// alone, and its labels do not matter there.
			mine := g.Claim != "" && m.Claim == g.Claim
			if len(out) == g.Count || used[name] || m.Replace || (!mine && (m.Claim != "" || g.ClaimOnly || !matches(m.Labels, g.MatchLabels))) || !ok(m) {
				continue
			}
			used[name] = true
			out = append(out, name)
		}
	}
	take(func(m Machine) bool { return m.ClaimedBy == cluster })
	free := func(m Machine) bool { return m.ClaimedBy == "" && m.Discoverable && !m.HasConfiguration }
	if g.Claim != "" {
		take(func(m Machine) bool { return m.Claim == g.Claim && free(m) })
	}
	take(free)
	return out, g.Count - len(out)
}

func matches(labels, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// natural compares names with their digit runs as numbers (dp-2 < dp-10).
func natural(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) - len(nb)
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// describe names machines for a message: "cp-1, cp-2".
func describe(names []string) string { return strings.Join(names, ", ") }

// plural is "1 machine" or "3 machines".
func plural(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func sortedKeys[V any](m map[string]V) []string {
	out := slices.Collect(maps.Keys(m))
	slices.SortFunc(out, natural)
	return out
}
