package rollout

import (
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// TestConfigureTemplatesAndOwners: a node named in Templates gets its own
// template, the others the shared one; the rollout's owners become the
// configuration's.
func TestConfigureTemplatesAndOwners(t *testing.T) {
	r := api.NewRollout("k1-1")
	r.Metadata.OwnerReferences = []api.OwnerReference{{APIVersion: api.ClusterAPIVersion, Kind: api.KindKubernetesCluster, Name: "k1"}}
	r.Spec.Template = api.NixosConfigurationSpec{GitRepo: "https://git.example/shared"}
	r.Spec.Templates = map[string]api.NixosConfigurationSpec{"cp-1": {GitRepo: "https://git.example/k", Flake: "#cp-1"}}
	own := Configure(r, &api.NodeProgress{Name: "cp-1"}, nil)
	if own.Spec.Flake != "#cp-1" || own.Spec.GitRepo != "https://git.example/k" || own.Spec.Generation != 1 {
		t.Fatalf("cp-1 got %+v, want its own template at generation 1", own.Spec)
	}
	if len(own.Metadata.OwnerReferences) != 1 || own.Metadata.OwnerReferences[0].Name != "k1" {
		t.Fatalf("cp-1's owners %+v, want the rollout's", own.Metadata.OwnerReferences)
	}
	cur := api.NewNixosConfiguration("dp-1")
	cur.Spec = api.NixosConfigurationSpec{Generation: 4, GitRepo: "https://git.example/old"}
	shared := Configure(r, &api.NodeProgress{Name: "dp-1"}, cur)
	if shared.Spec.GitRepo != "https://git.example/shared" || shared.Spec.Generation != 5 {
		t.Fatalf("dp-1 got %+v, want the shared template at generation 5", shared.Spec)
	}
}

// TestFleetRolloutLeavesClusterMachines: a rollout of every node leaves
// out a machine whose configuration a KubernetesCluster owns (its
// cluster's rollouts roll it), and takes it when the rollout names it.
func TestFleetRolloutLeavesClusterMachines(t *testing.T) {
	s := newSim(0, 2, "")
	owned := s.obs.Nodes[1].Config
	owned.Metadata.OwnerReferences = []api.OwnerReference{{APIVersion: api.ClusterAPIVersion, Kind: api.KindKubernetesCluster, Name: "k1"}}
	if st := Plan(s.obs, s.now); st.Action != Init || len(st.Order) != 1 || st.Order[0].Name != "dp-1" {
		t.Fatalf("fleet rollout: %s, want dp-1 only", st)
	}
	s.obs.Rollout.Spec.Nodes = []string{"dp-1", "dp-2"}
	if st := Plan(s.obs, s.now); st.Action != Init || len(st.Order) != 2 {
		t.Fatalf("named: %s, want both", st)
	}
	s.obs.Rollout.Spec.Nodes = nil
	s.obs.Rollout.Metadata.OwnerReferences = owned.Metadata.OwnerReferences
	if st := Plan(s.obs, s.now); st.Action != Init || len(st.Order) != 2 {
		t.Fatalf("the cluster's own rollout: %s, want both", st)
	}
}

// TestJournalsWaits: a wait between steps is journaled once for what it
// says; a wait within a step, an empty reason or nothing to do are not.
func TestJournalsWaits(t *testing.T) {
	const slot = "membership: StartJoin cp-9 waits for the one-change slot"
	between := func(msg string) *api.Rollout {
		r := api.NewRollout("r1")
		r.Status.Phase, r.Status.Message = api.RolloutRunning, msg
		return r
	}
	inFlight := between("data plane, 2 at a time")
	inFlight.Status.Operation, inFlight.Status.Current = "rollout-r1-1", []string{"dp-1"}
	for _, tc := range []struct {
		name string
		r    *api.Rollout
		s    Step
		want bool
	}{
		{"a new reason between steps", between("2 of 4 nodes done"), Step{Action: Wait, Reason: slot}, true},
		{"the same reason again", between(slot), Step{Action: Wait, Reason: slot}, false},
		{"a wait within a step", inFlight, Step{Action: Wait, Reason: "waiting for dp-1"}, false},
		{"a wait without a reason", between(""), Step{Action: Wait}, false},
		{"nothing to do", between(""), Step{Action: None, Reason: "paused"}, false},
		{"a step", inFlight, Step{Action: MarkDone, Nodes: []string{"dp-1"}}, true},
	} {
		if got := Journals(tc.r, tc.s); got != tc.want {
			t.Errorf("%s: Journals = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRecordMarkDoneWithExtend: a MarkDone that carries an Extend records
// its nodes done and starts the others in one write; the step goes on
// under its operation, naming the nodes still in flight.
func TestRecordMarkDoneWithExtend(t *testing.T) {
	s := newSim(0, 3, "")
	r := s.obs.Rollout
	r.Spec.MaxUnavailable = "2"
	Record(r, Plan(s.obs, s.now), s.now, "c-1") // Init
	start := Plan(s.obs, s.now)
	if start.Action != Start {
		t.Fatalf("second step %s, want Start", start)
	}
	Record(r, start, s.now, "c-1")
	op := r.Status.Operation
	later := s.now.Add(time.Minute)
	release := Record(r, Step{Action: MarkDone, Nodes: []string{"dp-1"}, Extend: []string{"dp-3"}}, later, "c-1")
	if release {
		t.Fatal("a MarkDone that starts dp-3 released the step's operation")
	}
	if r.Status.Operation != op || !slices.Equal(r.Status.Current, []string{"dp-2", "dp-3"}) {
		t.Fatalf("operation %q current %v, want %q [dp-2 dp-3]", r.Status.Operation, r.Status.Current, op)
	}
	if p := r.Node("dp-1"); p.Phase != api.NodeDone || !p.FinishedAt.Equal(later) {
		t.Fatalf("dp-1 %s finished %v, want Done at %v", p.Phase, p.FinishedAt, later)
	}
	if p := r.Node("dp-3"); p.Phase != api.NodeApplying || !p.StartedAt.Equal(later) {
		t.Fatalf("dp-3 %s started %v, want Applying at %v", p.Phase, p.StartedAt, later)
	}
}
