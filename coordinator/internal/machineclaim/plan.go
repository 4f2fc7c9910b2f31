package machineclaim

import (
	"fmt"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// Machine is one machine the claim lists, as the claimant observed it.
type Machine struct {
	Name string
	// Registered: its node has registered (a booting VM has not yet).
	Registered bool
	// Member: it holds the claimant's role (an etcd voter or learner, a
	// machine of the Kubernetes cluster). A member is never released: it
	// gives up the role first.
	Member bool
	// Left: its node left the cluster (removed, or its removal done): it
	// will not serve again.
	Left bool
	// DeadSince is when its node was last seen alive, or its machine
	// failed; zero while it is alive (or still booting).
	DeadSince time.Time
}

// Input is everything the planner reads.
type Input struct {
	// Claim is the claim's name, Pool the pool it draws from.
	Claim, Pool string
	// Roles are handed to the machines at first boot; Quorum says they
	// vote (etcd voters), so the pool reports a spread that loses quorum.
	Roles  []api.Role
	Quorum bool
	// Want is how many machines the cluster wants in the role in all
	// (spec.voters, a plane's count).
	Want int
	// Own is how many registered, alive machines that are not the claim's
	// fill the role already (for etcd: voters, learners and standbys).
	Own int
	// Others are the claimant's members that are not the claim's
	// machines: the claim's machines are spread against them.
	Others []string
	// Current is the claim's spec as stored (zero: no claim yet).
	Current api.MachineClaimSpec
	// Machines is the state of the machines Current lists; a listed name
	// missing here is still being created.
	Machines []Machine
	// ReplaceDeadAfter releases a machine dead (or failed) this long once
	// it holds no role; zero never does.
	ReplaceDeadAfter time.Duration
	Now              time.Time
}

// Release is one machine taken off the claim, and why.
type Release struct {
	Name, Reason string
}

// Plan is the claim's next spec and what changed.
type Plan struct {
	// Spec is the claim's spec to write; Changed says it differs from
	// Current.
	Spec    api.MachineClaimSpec
	Changed bool
	// Release are the machines taken off the list (the pool removes
	// their nodes, then deletes their domains and disks), Add the fresh
	// names listed.
	Release []Release
	Add     []string
	// Waits say why a machine the cluster no longer wants is still
	// listed.
	Waits []string
}

// Empty tells whether the plan writes nothing.
func (p Plan) Empty() bool { return !p.Changed }

// Compute plans one pass. It is pure: the same input gives the same plan.
func Compute(in Input) Plan {
	state := map[string]Machine{}
	for _, m := range in.Machines {
		state[m.Name] = m
	}
	var pl Plan
	var kept []string
	for _, name := range in.Current.Machines {
		m := state[name]
		dead := in.ReplaceDeadAfter > 0 && !m.DeadSince.IsZero() && in.Now.Sub(m.DeadSince) >= in.ReplaceDeadAfter
		switch {
		case m.Left:
			pl.Release = append(pl.Release, Release{name, "its node left the cluster"})
		case dead && m.Member:
			// The member goes first (the membership planner removes a
			// voter dead past replaceDeadMembersAfter, leadership moved
			// first); the machine is released once its node has left.
			kept = append(kept, name)
			pl.Waits = append(pl.Waits, fmt.Sprintf("%s is dead for %s: waiting for its member to be removed", name, in.Now.Sub(m.DeadSince).Round(time.Second)))
		case dead:
			pl.Release = append(pl.Release, Release{name, fmt.Sprintf("dead for %s (replaceDeadMembersAfter %s)", in.Now.Sub(m.DeadSince).Round(time.Second), in.ReplaceDeadAfter)})
		default:
			kept = append(kept, name)
		}
	}
	want := max(0, in.Want-in.Own)
	if surplus := len(kept) - want; surplus > 0 {
		// Take away machines holding no role, the ones not yet registered
		// first (nothing to hand over), then the newest.
		cands := slices.Clone(kept)
		slices.Reverse(cands)
		slices.SortStableFunc(cands, func(a, b string) int {
			return boolCmp(state[a].Registered, state[b].Registered)
		})
		var members []string
		for _, name := range cands {
			m := state[name]
			switch {
			case m.Member:
				members = append(members, name)
			case surplus > 0:
				pl.Release = append(pl.Release, Release{name, fmt.Sprintf("the cluster wants %d, %d of them from other machines", in.Want, in.Own)})
				kept = slices.DeleteFunc(kept, func(n string) bool { return n == name })
				surplus--
			}
		}
		if surplus > 0 {
			slices.Sort(members)
			pl.Waits = append(pl.Waits, fmt.Sprintf("%d more machines than the cluster wants hold its role (%v): waiting for them to give it up", surplus, members))
		}
	}
	next := in.Current.NextOrdinal
	for len(kept) < want {
		name := api.ClaimMachineName(in.Pool, in.Claim, next)
		if len(name) > maxName {
			pl.Waits = append(pl.Waits, fmt.Sprintf("machine name %q is longer than %d characters: give the pool a shorter name", name, maxName))
			break
		}
		next++
		kept = append(kept, name)
		pl.Add = append(pl.Add, name)
	}
	pl.Spec = api.MachineClaimSpec{Pool: in.Pool, Machines: kept, NextOrdinal: next, Roles: slices.Clone(in.Roles),
		SpreadWith: slices.Sorted(slices.Values(in.Others)), Quorum: in.Quorum}
	pl.Changed = !specEqual(pl.Spec, in.Current)
	return pl
}

// maxName is the longest machine name: a DNS label, as it names the
// domain and the node.
const maxName = 63

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

func specEqual(a, b api.MachineClaimSpec) bool {
	return a.Pool == b.Pool && slices.Equal(a.Machines, b.Machines) && a.NextOrdinal == b.NextOrdinal &&
		slices.Equal(a.Roles, b.Roles) && slices.Equal(a.SpreadWith, b.SpreadWith) && a.Quorum == b.Quorum
}
