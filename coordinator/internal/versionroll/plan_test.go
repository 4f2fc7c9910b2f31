package versionroll

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

var t0 = time.Unix(1_000_000, 0).UTC()

// fleet is n members cp-1..cp-n on version v, cp-<leader> leading.
func fleet(n, leader int, v string) Observed {
	obs := Observed{Cluster: minorOf(v)}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("cp-%d", i)
		obs.Members = append(obs.Members, Member{Name: name, Node: name, ID: api.MemberID(i), ClientURL: "http://" + name,
			Voter: true, Healthy: true, Alive: true, Leader: i == leader, Version: v, StorageVersion: minorOf(v)})
	}
	return obs
}

func minorOf(v string) string { return v[:strings.LastIndex(v, ".")] + ".0" }

// sim applies steps as the fleet would: an agent serves its wanted
// version on the next pass, leadership moves when asked, etcd lowers the
// cluster version on a downgrade enable and ends the downgrade once every
// member runs the target minor; stuck nodes never change.
type sim struct {
	obs   Observed
	now   time.Time
	stuck map[string]bool
}

func (s *sim) run(t *testing.T, max int) []string {
	t.Helper()
	var out []string
	for range max {
		st := Plan(s.obs, s.now)
		out = append(out, st.String())
		if st.Action == Done || st.Action == Halt || st.Action == Refused || st.Action == None {
			return out
		}
		s.apply(t, st)
		s.now = s.now.Add(time.Second)
	}
	t.Fatalf("no end within %d steps:\n%s", max, strings.Join(out, "\n"))
	return nil
}

func (s *sim) apply(t *testing.T, st Step) {
	ms := s.obs.Members
	switch st.Action {
	case SetVersion:
		if s.obs.ActiveOp != "" {
			t.Fatalf("%s while %s holds the slot", st, s.obs.ActiveOp)
		}
		for i := range ms {
			if ms[i].Leader && ms[i].Node == st.Node && len(ms) > 1 {
				t.Fatalf("%s: the leader changes version while it leads", st)
			}
			if ms[i].Node == st.Node {
				ms[i].Want, ms[i].WantSince = st.Version, s.now
			}
		}
		s.obs.ActiveOp = st.Op
	case CloseOp:
		s.obs.ActiveOp = ""
	case TransferLeader:
		for i := range ms {
			ms[i].Leader = ms[i].ID == st.To
		}
	case EnableDowngrade:
		s.obs.Downgrading, s.obs.DowngradeTarget, s.obs.Cluster = true, minorOf(st.Version), minorOf(st.Version)
		for i := range ms {
			ms[i].StorageVersion = minorOf(st.Version)
		}
	case CancelDowngrade:
		s.obs.Downgrading = false
		s.obs.Cluster = minorOf(ms[0].Version)
		for i := range ms {
			ms[i].StorageVersion = s.obs.Cluster
		}
	case Wait:
	}
	// Agents follow their wanted version.
	for i := range ms {
		if ms[i].Want != "" && ms[i].Want != ms[i].Version && !s.stuck[ms[i].Node] {
			ms[i].Version = ms[i].Want
			if ms[i].StorageVersion == "" {
				ms[i].StorageVersion = minorOf(ms[i].Want)
			}
		}
	}
	if s.obs.Downgrading {
		all := true
		for _, m := range ms {
			all = all && minorOf(m.Version) == s.obs.DowngradeTarget
		}
		if all {
			s.obs.Downgrading = false
		}
	}
}

func TestUpgradeRollsFollowersFirstLeaderLast(t *testing.T) {
	s := &sim{obs: fleet(3, 2, "3.6.16"), now: t0}
	s.obs.Target = "3.7.3"
	got := s.run(t, 20)
	want := []string{
		"SetVersion cp-1 3.7.3: cp-1 runs 3.6.16; one member at a time, followers first",
		"CloseOp: no member is changing version",
		"SetVersion cp-3 3.7.3: cp-3 runs 3.6.16; one member at a time, followers first",
		"CloseOp: no member is changing version",
		"TransferLeader cp-2 to=0000000000000001: cp-2 leads etcd: moving leadership to cp-1, which runs 3.7.3, before it changes version",
		"SetVersion cp-2 3.7.3: cp-2 runs 3.6.16; one member at a time, followers first",
		"CloseOp: no member is changing version",
		"Done 3.7.3: 3 members run 3.7.3",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDowngradeGoesThroughTheDowngradeAPI: validate+enable first, then
// the same rolling change; etcd ends the downgrade.
func TestDowngradeGoesThroughTheDowngradeAPI(t *testing.T) {
	s := &sim{obs: fleet(3, 1, "3.7.3"), now: t0}
	s.obs.Target = "3.6.16"
	got := s.run(t, 20)
	if !strings.HasPrefix(got[0], "EnableDowngrade 3.6.16") {
		t.Fatalf("first step %q, want EnableDowngrade", got[0])
	}
	if got[len(got)-1] != "Done 3.6.16: 3 members run 3.6.16" || s.obs.Downgrading {
		t.Fatalf("downgrade did not finish:\n%s", strings.Join(got, "\n"))
	}
	sets := 0
	for _, g := range got {
		if strings.HasPrefix(g, "EnableDowngrade") && g != got[0] {
			t.Fatalf("downgrade enabled twice:\n%s", strings.Join(got, "\n"))
		}
		if strings.HasPrefix(g, "SetVersion") {
			sets++
		}
	}
	if sets != 3 {
		t.Fatalf("%d SetVersion steps, want 3:\n%s", sets, strings.Join(got, "\n"))
	}
}

// TestAbortedDowngradeIsCancelled: spec.version set back while a
// downgrade is enabled cancels it, and the members already downgraded
// roll back up.
func TestAbortedDowngradeIsCancelled(t *testing.T) {
	s := &sim{obs: fleet(3, 1, "3.7.3"), now: t0}
	s.obs.Target = "3.6.16"
	for range 3 { // enable, set cp-2, close
		s.apply(t, Plan(s.obs, s.now))
	}
	if !s.obs.Downgrading || s.obs.Members[1].Version != "3.6.16" {
		t.Fatalf("setup: %+v", s.obs)
	}
	s.obs.Target = "3.7.3"
	st := Plan(s.obs, s.now)
	if st.Action != CancelDowngrade {
		t.Fatalf("after spec.version went back: %s, want CancelDowngrade", st)
	}
	got := s.run(t, 20)
	if got[len(got)-1] != "Done 3.7.3: 3 members run 3.7.3" {
		t.Fatalf("did not roll back up:\n%s", strings.Join(got, "\n"))
	}
}

func TestPlanTable(t *testing.T) {
	tests := []struct {
		name string
		obs  func() Observed
		now  time.Time
		want string // prefix of Step.String()
	}{
		{"no target", func() Observed { return fleet(3, 1, "3.6.16") }, t0, "None"},
		{"two minors up refused", func() Observed { o := fleet(3, 1, "3.5.35"); o.Target = "3.7.3"; return o }, t0,
			"Refused 3.7.3: cp-1 runs 3.5.35: etcd version path 3.5.35 -> 3.7.3 refused: 2 minors up"},
		{"unknown version refused", func() Observed { o := fleet(3, 1, "3.6.16"); o.Target = "3.9.0"; return o }, t0,
			"Refused 3.9.0: cp-1 runs 3.6.16: desired version: etcdversion: unknown etcd version"},
		{"minor up from an old patch refused", func() Observed { o := fleet(3, 1, "3.6.10"); o.Target = "3.7.3"; return o }, t0,
			"Refused 3.7.3: cp-1 runs 3.6.10: etcd version path 3.6.10 -> 3.7.3 refused: a minor upgrade starts from the latest 3.6 patch, 3.6.16; upgrade to 3.6.16 first"},
		{"malformed target refused", func() Observed { o := fleet(3, 1, "3.6.16"); o.Target = "latest"; return o }, t0, "Refused: spec.version:"},
		{"refused target releases a held slot", func() Observed {
			o := fleet(3, 1, "3.6.16")
			o.Target, o.ActiveOp = "3.9.0", OpName("cp-2", "3.7.3")
			return o
		}, t0, "CloseOp: spec.version changed: Refused"},
		{"patch", func() Observed { o := fleet(3, 1, "3.7.2"); o.Target = "3.7.3"; return o }, t0, "SetVersion cp-2 3.7.3"},
		{"another operation holds the slot", func() Observed { o := fleet(3, 1, "3.6.16"); o.Target, o.ActiveOp = "3.7.3", "join-cp-4"; return o }, t0,
			"Wait: operation join-cp-4 is in flight"},
		{"unhealthy voter waits", func() Observed {
			o := fleet(3, 1, "3.6.16")
			o.Target, o.Members[2].Healthy = "3.7.3", false
			return o
		}, t0, "Wait: etcd cluster is not healthy: unhealthy voters: cp-3"},
		{"dead node waits", func() Observed {
			o := fleet(3, 1, "3.6.16")
			o.Target, o.Members[1].Alive = "3.7.3", false
			return o
		}, t0, "Wait cp-2: cp-2 is down"},
		{"in flight waits with the agent's reason", func() Observed {
			o := fleet(3, 1, "3.6.16")
			o.Target, o.ActiveOp = "3.7.3", OpName("cp-2", "3.7.3")
			o.Members[1].Want, o.Members[1].WantSince, o.Members[1].Error = "3.7.3", t0, "no etcd 3.7.3 binary"
			return o
		}, t0.Add(time.Minute), "Wait cp-2: waiting for cp-2 to serve 3.7.3, healthy (runs \"3.6.16\"): no etcd 3.7.3 binary"},
		{"in flight past the step timeout halts", func() Observed {
			o := fleet(3, 1, "3.6.16")
			o.Target, o.ActiveOp = "3.7.3", OpName("cp-2", "3.7.3")
			o.Members[1].Want, o.Members[1].WantSince = "3.7.3", t0
			return o
		}, t0.Add(DefaultStepTimeout), "Halt cp-2: cp-2 did not serve 3.7.3, healthy, within 5m0s"},
		{"served but unhealthy still in flight", func() Observed {
			o := fleet(3, 1, "3.6.16")
			o.Target, o.ActiveOp = "3.7.3", OpName("cp-2", "3.7.3")
			o.Members[1].Want, o.Members[1].WantSince, o.Members[1].Version, o.Members[1].Healthy = "3.7.3", t0, "3.7.3", false
			return o
		}, t0, "Wait cp-2"},
		{"external members are not rolled", func() Observed {
			o := fleet(1, 1, "3.7.3")
			o.Target = "3.7.3"
			o.Members = append(o.Members, Member{Name: "ext", Voter: true, Healthy: true, Version: "3.7.3"})
			return o
		}, t0, "Done 3.7.3: 1 members run 3.7.3"},
		{"leader with no updated voter halts", func() Observed {
			o := fleet(2, 1, "3.6.16")
			o.Target = "3.7.3"
			o.Members[1].Version, o.Members[1].Alive = "3.7.3", false // its agent is gone
			return o
		}, t0, "Halt cp-1: cp-1 leads etcd and no healthy voter on 3.7.3 can take leadership"},
		{"single voter rolls in place", func() Observed { o := fleet(1, 1, "3.6.16"); o.Target = "3.7.3"; return o }, t0,
			"SetVersion cp-1 3.7.3: cp-1 runs 3.6.16; the only voter changes version in place"},
		{"downgrade enabled, storage not yet migrated: wait", func() Observed {
			o := fleet(3, 1, "3.7.3")
			o.Target, o.Downgrading, o.DowngradeTarget, o.Cluster = "3.6.16", true, "3.6.0", "3.6.0"
			return o
		}, t0, "Wait cp-2: waiting for etcd to lower the cluster version (3.6.0) and cp-2's storage version (\"3.7.0\") to 3.6.0"},
		{"downgrade enabled, storage migrated: roll", func() Observed {
			o := fleet(3, 1, "3.7.3")
			o.Target, o.Downgrading, o.DowngradeTarget, o.Cluster = "3.6.16", true, "3.6.0", "3.6.0"
			for i := range o.Members {
				o.Members[i].StorageVersion = "3.6.0"
			}
			return o
		}, t0, "SetVersion cp-2 3.6.16"},
		{"downgrade from 3.5 refused", func() Observed { o := fleet(3, 1, "3.5.35"); o.Target = "3.4.45"; return o }, t0,
			"Refused 3.4.45: cp-1 runs 3.5.35: etcd version path 3.5.35 -> 3.4.45 refused: etcd's downgrade API downgrades from 3.6 on"},
		{"downgrade enabled, spec.version elsewhere: cancel", func() Observed {
			o := fleet(3, 1, "3.7.3")
			o.Target, o.Downgrading, o.DowngradeTarget, o.Cluster = "3.7.3", true, "3.6.0", "3.6.0"
			return o
		}, t0, "CancelDowngrade"},
		{"downgrade enabled by hand, no spec.version: left alone", func() Observed {
			o := fleet(3, 1, "3.7.3")
			o.Downgrading, o.DowngradeTarget, o.Cluster = true, "3.6.0", "3.6.0"
			return o
		}, t0, "None"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Plan(tt.obs(), tt.now).String()
			if !strings.HasPrefix(got, tt.want) {
				t.Fatalf("got  %s\nwant %s...", got, tt.want)
			}
		})
	}
}
