package kubeplan

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/homystack/nico/pkg/api"
)

// Want is the configuration one selected machine should run.
type Want struct {
	Machine      string
	ControlPlane bool
	Spec         api.NixosConfigurationSpec
}

// RollFacts is what Next reads.
type RollFacts struct {
	// Desired are the selected machines' configurations.
	Desired []Want
	// Current are the machines' configurations as they are (absent: none).
	Current map[string]*api.NixosConfigurationSpec
	// Release are the machines the cluster holds and no longer selects (all
	// of them when deleting), with what each runs once released.
	Release map[string]api.NixosConfigurationSpec
	// Rollouts are the cluster's own rollouts, oldest first.
	Rollouts []*api.Rollout
	// VersionChange: the desired Kubernetes version is not the one the
	// machines run (status.version); the control plane rolls first.
	VersionChange bool
	// APIServerReady: the API servers are ready (Judge).
	APIServerReady bool
	// Drain: a drain hook is configured and runs before a release (also
	// when the whole cluster is being deleted; PlanDrain).
	Drain bool
	// Down are the selected machines whose heartbeat is gone. They are
	// not rolled onto: the rollout would wait for them up to its step
	// timeout, holding the one-change slot that the removal of a dead
	// machine's etcd member needs. They roll once back, or are replaced.
	Down map[string]bool
}

// Action is what the cluster controller does next.
type Action string

// Actions.
const (
	// None: every machine runs what it should.
	None Action = "None"
	// Wait: a rollout of the cluster is in flight, or the data plane waits
	// for the API servers.
	Wait Action = "Wait"
	// Halted: the cluster's last rollout halted and nothing changed since.
	Halted Action = "Halted"
	// Roll writes a new Rollout of Machines with Templates.
	Roll Action = "Roll"
	// Release (after Drain, when set) writes a Rollout that switches
	// Machines to their release configuration and then deletes their
	// configurations.
	Release Action = "Release"
	// Unclaim drops the cluster's claims on Machines (released, with no
	// configuration left).
	Unclaim Action = "Unclaim"
)

// RollPlan is Next's decision.
type RollPlan struct {
	Action   Action
	Machines []string
	// Templates are the machines' configurations (Roll, Release).
	Templates         map[string]api.NixosConfigurationSpec
	ControlPlaneFirst bool
	// Drain: run the drain hook on Machines before the release.
	Drain bool
	// Workers are those of Machines in the data plane (Roll): they roll
	// as Kubernetes nodes (api.RolloutKubernetes).
	Workers []string
	// ControlPlane are those of Machines in the control plane (Roll):
	// each is done once its API server is ready.
	ControlPlane []string
	Reason       string
}

// Next plans the cluster's next rollout. One rollout of the cluster runs
// at a time. Machines whose configuration differs from the desired one
// roll in two parts: the control plane first when the version changes or
// the API servers are not ready (a new cluster), else the data plane
// first; the data plane never rolls while the API servers are not ready.
// Then machines no longer selected are drained (when a hook is set),
// switched to their release configuration, and unclaimed once their
// configuration is gone. A halted rollout stops everything until the
// desired configuration of one of its machines changes. A machine that
// is down (RollFacts.Down) is left out of rolls until it is back.
func Next(f RollFacts) RollPlan {
	for _, r := range f.Rollouts {
		if !r.Status.Phase.Finished() && r.Status.Phase != api.RolloutHalted {
			return RollPlan{Action: Wait, Reason: fmt.Sprintf("rollout %s is %s", r.Metadata.Name, phaseName(r.Status.Phase))}
		}
	}
	if n := len(f.Rollouts); n > 0 && f.Rollouts[n-1].Status.Phase == api.RolloutHalted && unchanged(f, f.Rollouts[n-1]) {
		r := f.Rollouts[n-1]
		return RollPlan{Action: Halted, Reason: fmt.Sprintf("rollout %s halted at %s: %s", r.Metadata.Name, r.Status.HaltedNode, r.Status.HaltedReason)}
	}
	var cp, dp []string
	templates := map[string]api.NixosConfigurationSpec{}
	for _, w := range f.Desired {
		if same(f.Current[w.Machine], w.Spec) || f.Down[w.Machine] {
			continue
		}
		templates[w.Machine] = w.Spec
		if w.ControlPlane {
			cp = append(cp, w.Machine)
		} else {
			dp = append(dp, w.Machine)
		}
	}
	pick := func(ms []string, cpFirst bool, why string) RollPlan {
		t := map[string]api.NixosConfigurationSpec{}
		for _, m := range ms {
			t[m] = templates[m]
		}
		p := RollPlan{Action: Roll, Machines: ms, Templates: t, ControlPlaneFirst: cpFirst, Reason: why}
		for _, m := range ms {
			if slices.Contains(cp, m) {
				p.ControlPlane = append(p.ControlPlane, m)
			}
		}
		return p
	}
	cpFirst := f.VersionChange || !f.APIServerReady
	switch {
	case cpFirst && len(cp) > 0:
		why := "control plane first: the API servers are not ready"
		if f.VersionChange {
			why = "control plane first: the Kubernetes version changes"
		}
		return pick(cp, true, why)
	case len(dp) > 0 && !f.APIServerReady:
		return RollPlan{Action: Wait, Machines: dp, Reason: "the data plane waits for the API servers"}
	case len(dp) > 0:
		why := "data plane first: the version does not change"
		if cpFirst {
			why = "data plane after the control plane"
		}
		p := pick(dp, false, why)
		p.Workers = dp
		return p
	case len(cp) > 0:
		return pick(cp, true, "control plane after the data plane")
	}
	var unclaim, release []string
	rel := map[string]api.NixosConfigurationSpec{}
	for _, m := range sortedKeys(f.Release) {
		if f.Current[m] == nil {
			unclaim = append(unclaim, m)
			continue
		}
		release = append(release, m)
		rel[m] = f.Release[m]
	}
	if len(unclaim) > 0 {
		return RollPlan{Action: Unclaim, Machines: unclaim, Reason: "released machines have no configuration left"}
	}
	if len(release) > 0 {
		return RollPlan{Action: Release, Machines: release, Templates: rel, Drain: f.Drain, Reason: "machines no longer in the cluster"}
	}
	return RollPlan{Action: None}
}

// unchanged tells whether every machine of the halted rollout r is still
// wanted with the configuration r gave it.
func unchanged(f RollFacts, r *api.Rollout) bool {
	want := map[string]api.NixosConfigurationSpec{}
	for _, w := range f.Desired {
		want[w.Machine] = w.Spec
	}
	for m, s := range f.Release {
		want[m] = s
	}
	for _, m := range r.Spec.Nodes {
		w, ok := want[m]
		t, has := r.Spec.Templates[m]
		if !ok || !has || !reflect.DeepEqual(strip(w), strip(t)) {
			return false
		}
	}
	return true
}

// same tells whether cur is want but for generation and attempt.
func same(cur *api.NixosConfigurationSpec, want api.NixosConfigurationSpec) bool {
	if cur == nil {
		return false
	}
	return reflect.DeepEqual(strip(*cur), strip(want))
}

func strip(s api.NixosConfigurationSpec) api.NixosConfigurationSpec {
	s.Generation, s.Attempt = 0, 0
	if len(s.AdditionalFiles) == 0 {
		s.AdditionalFiles = nil
	}
	if len(s.HostFiles) == 0 {
		s.HostFiles = nil
	}
	return s
}

func phaseName(p api.RolloutPhase) string {
	if p == api.RolloutPending {
		return "pending"
	}
	return string(p)
}
