package machineclaim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// claim is a stored claim spec listing names, the next ordinal after them.
func claim(next int, names ...string) api.MachineClaimSpec {
	return api.MachineClaimSpec{Pool: "vms", Machines: names, NextOrdinal: next, Roles: []api.Role{api.RoleControlPlane}, Quorum: true}
}

func input(want, own int, cur api.MachineClaimSpec, ms ...Machine) Input {
	return Input{Claim: "etcd", Pool: "vms", Roles: []api.Role{api.RoleControlPlane}, Quorum: true, Want: want, Own: own,
		Current: cur, Machines: ms, ReplaceDeadAfter: time.Minute, Now: now}
}

func voter(name string) Machine   { return Machine{Name: name, Registered: true, Member: true} }
func standby(name string) Machine { return Machine{Name: name, Registered: true} }

func TestCompute(t *testing.T) {
	cases := []struct {
		name    string
		in      Input
		list    []string // the claim's machines after the plan
		release []string
		wait    string // a piece of a wait, "" for none
	}{
		{"grow 1 to 3 voters: ask for two VMs", input(3, 1, api.MachineClaimSpec{}), []string{"vms-etcd-0", "vms-etcd-1"}, nil, ""},
		{"enough hosts of their own: ask for none", input(3, 3, api.MachineClaimSpec{}), nil, nil, ""},
		{"more hosts of their own than voters: ask for none", input(3, 5, api.MachineClaimSpec{}), nil, nil, ""},
		{"grow to 5: the listed VMs count, booting or not", input(5, 1, claim(2, "vms-etcd-0", "vms-etcd-1"), voter("vms-etcd-0")),
			[]string{"vms-etcd-0", "vms-etcd-1", "vms-etcd-2", "vms-etcd-3"}, nil, ""},
		{"steady", input(3, 1, claim(2, "vms-etcd-0", "vms-etcd-1"), voter("vms-etcd-0"), voter("vms-etcd-1")),
			[]string{"vms-etcd-0", "vms-etcd-1"}, nil, ""},
		{"a dead voter is kept until its member is removed", input(3, 1, claim(2, "vms-etcd-0", "vms-etcd-1"), voter("vms-etcd-0"),
			Machine{Name: "vms-etcd-1", Registered: true, Member: true, DeadSince: now.Add(-time.Hour)}),
			[]string{"vms-etcd-0", "vms-etcd-1"}, nil, "vms-etcd-1 is dead for 1h0m0s: waiting for its member to be removed"},
		{"a removed dead voter is released and a fresh VM takes its place", input(3, 1, claim(2, "vms-etcd-0", "vms-etcd-1"), voter("vms-etcd-0"),
			Machine{Name: "vms-etcd-1", Registered: true, Left: true, DeadSince: now.Add(-time.Hour)}),
			[]string{"vms-etcd-0", "vms-etcd-2"}, []string{"vms-etcd-1"}, ""},
		{"a dead standby is released past replaceDeadAfter", input(3, 1, claim(2, "vms-etcd-0", "vms-etcd-1"), voter("vms-etcd-0"),
			Machine{Name: "vms-etcd-1", Registered: true, DeadSince: now.Add(-time.Minute)}),
			[]string{"vms-etcd-0", "vms-etcd-2"}, []string{"vms-etcd-1"}, ""},
		{"a dead standby is kept before replaceDeadAfter", input(3, 1, claim(2, "vms-etcd-0", "vms-etcd-1"), voter("vms-etcd-0"),
			Machine{Name: "vms-etcd-1", Registered: true, DeadSince: now.Add(-59 * time.Second)}),
			[]string{"vms-etcd-0", "vms-etcd-1"}, nil, ""},
		{"a VM that failed to boot is released and replaced", input(3, 1, claim(2, "vms-etcd-0", "vms-etcd-1"), voter("vms-etcd-0"),
			Machine{Name: "vms-etcd-1", DeadSince: now.Add(-time.Hour)}),
			[]string{"vms-etcd-0", "vms-etcd-2"}, []string{"vms-etcd-1"}, ""},
		{"zero replaceDeadAfter never releases the dead", func() Input {
			in := input(3, 1, claim(2, "vms-etcd-0", "vms-etcd-1"), voter("vms-etcd-0"), Machine{Name: "vms-etcd-1", Registered: true, DeadSince: now.Add(-time.Hour)})
			in.ReplaceDeadAfter = 0
			return in
		}(), []string{"vms-etcd-0", "vms-etcd-1"}, nil, ""},
		{"scale down: voters are waited for, the member goes first", input(1, 1, claim(2, "vms-etcd-0", "vms-etcd-1"), voter("vms-etcd-0"), voter("vms-etcd-1")),
			[]string{"vms-etcd-0", "vms-etcd-1"}, nil, "2 more machines than the cluster wants hold its role ([vms-etcd-0 vms-etcd-1])"},
		{"scale down: a shed voter (now a standby) is released", input(1, 1, claim(2, "vms-etcd-0", "vms-etcd-1"), voter("vms-etcd-0"), standby("vms-etcd-1")),
			[]string{"vms-etcd-0"}, []string{"vms-etcd-1"}, "1 more machines"},
		{"scale down: a VM not yet registered goes before a standby", input(3, 1, claim(3, "vms-etcd-0", "vms-etcd-1", "vms-etcd-2"), standby("vms-etcd-0"), standby("vms-etcd-1")),
			[]string{"vms-etcd-0", "vms-etcd-1"}, []string{"vms-etcd-2"}, ""},
		{"scale down: the newest standby goes first", input(3, 2, claim(3, "vms-etcd-0", "vms-etcd-2"), standby("vms-etcd-0"), standby("vms-etcd-2")),
			[]string{"vms-etcd-0"}, []string{"vms-etcd-2"}, ""},
		{"want zero: every machine holding no role is released", input(0, 0, claim(2, "vms-etcd-0", "vms-etcd-1"), standby("vms-etcd-0"), standby("vms-etcd-1")),
			nil, []string{"vms-etcd-1", "vms-etcd-0"}, ""},
		{"a name too long for a DNS label is not listed", func() Input {
			in := input(3, 1, api.MachineClaimSpec{})
			in.Pool = strings.Repeat("p", 60)
			return in
		}(), nil, nil, "longer than 63 characters"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pl := Compute(c.in)
			if !slices.Equal(pl.Spec.Machines, c.list) {
				t.Fatalf("machines %v, want %v (waits %v)", pl.Spec.Machines, c.list, pl.Waits)
			}
			var rel []string
			for _, r := range pl.Release {
				rel = append(rel, r.Name)
			}
			if !slices.Equal(rel, c.release) {
				t.Fatalf("released %v, want %v", rel, c.release)
			}
			waits := strings.Join(pl.Waits, "; ")
			if (c.wait == "") != (waits == "") || !strings.Contains(waits, c.wait) {
				t.Fatalf("waits %q, want %q", waits, c.wait)
			}
			for _, name := range pl.Add {
				if slices.Contains(c.in.Current.Machines, name) || pl.Spec.NextOrdinal <= c.in.Current.NextOrdinal {
					t.Fatalf("added %s again (next ordinal %d)", name, pl.Spec.NextOrdinal)
				}
			}
		})
	}
}

// TestSteadyStateWritesNothing: a plan applied and fed back is stable.
func TestSteadyStateWritesNothing(t *testing.T) {
	in := input(3, 1, api.MachineClaimSpec{})
	in.Others = []string{"cp-1"}
	pl := Compute(in)
	if !pl.Changed {
		t.Fatal("the first plan writes nothing")
	}
	in.Current = pl.Spec
	in.Machines = []Machine{voter("vms-etcd-0"), voter("vms-etcd-1")}
	if pl := Compute(in); pl.Changed {
		t.Fatalf("the second plan writes %+v", pl.Spec)
	}
	if !slices.Equal(pl.Spec.SpreadWith, []string{"cp-1"}) || !pl.Spec.Quorum || !slices.Equal(pl.Spec.Roles, []api.Role{api.RoleControlPlane}) {
		t.Fatalf("spec %+v", pl.Spec)
	}
}

// TestReplaceConverges simulates a dead VM voter through its removal: the
// claim ends with as many machines as it wants, none of them reused.
func TestReplaceConverges(t *testing.T) {
	in := input(3, 1, claim(2, "vms-etcd-0", "vms-etcd-1"), voter("vms-etcd-0"),
		Machine{Name: "vms-etcd-1", Registered: true, Member: true, DeadSince: now.Add(-time.Hour)})
	if pl := Compute(in); pl.Changed {
		t.Fatalf("changed while the dead member is still a member: %+v", pl)
	}
	in.Machines[1] = Machine{Name: "vms-etcd-1", Registered: true, Left: true, DeadSince: now.Add(-time.Hour)}
	pl := Compute(in)
	in.Current, in.Machines = pl.Spec, []Machine{voter("vms-etcd-0")}
	if pl := Compute(in); pl.Changed || !slices.Equal(pl.Spec.Machines, []string{"vms-etcd-0", "vms-etcd-2"}) {
		t.Fatalf("not converged: %+v", pl)
	}
}
