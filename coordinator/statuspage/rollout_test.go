package statuspage

import (
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// TestRolloutETA: the time left is the mean time of the finished nodes for
// each node not finished, less what a running node has already taken; no
// estimate before a node finished.
func TestRolloutETA(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name  string
		nodes []api.NodeProgress
		now   time.Time
		want  time.Duration
		ok    bool
	}{
		{"nothing finished", []api.NodeProgress{{Name: "a", StartedAt: at(0)}, {Name: "b"}}, at(10), 0, false},
		{"one done, one pending", []api.NodeProgress{{Name: "a", StartedAt: at(0), FinishedAt: at(30)}, {Name: "b"}}, at(30), 30 * time.Second, true},
		{"mean of two, one running", []api.NodeProgress{
			{Name: "a", StartedAt: at(0), FinishedAt: at(20)},
			{Name: "b", StartedAt: at(20), FinishedAt: at(60)},
			{Name: "c", StartedAt: at(60)},
			{Name: "d"},
		}, at(70), 20*time.Second + 30*time.Second, true},
		{"running past the mean counts nothing for it", []api.NodeProgress{
			{Name: "a", StartedAt: at(0), FinishedAt: at(10)},
			{Name: "b", StartedAt: at(10)},
		}, at(100), 0, true},
		{"all done", []api.NodeProgress{{Name: "a", StartedAt: at(0), FinishedAt: at(10)}}, at(20), 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := api.NewRollout("r")
			r.Status.Nodes = tc.nodes
			got, ok := rolloutETA(r, tc.now)
			if got != tc.want || ok != tc.ok {
				t.Errorf("rolloutETA = %s, %v; want %s, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestRolloutViewsOrder: rollouts in progress come before finished ones,
// and a finished rollout has no ETA.
func TestRolloutViewsOrder(t *testing.T) {
	done := api.NewRollout("a-done")
	done.Status.Phase = api.RolloutSucceeded
	done.Status.Nodes = []api.NodeProgress{{Name: "n", Phase: api.NodeDone, StartedAt: t0, FinishedAt: t0.Add(time.Second)}}
	running := api.NewRollout("b-running")
	running.Status.Phase = api.RolloutRunning
	running.Status.Nodes = []api.NodeProgress{{Name: "n", Phase: api.NodeDone, StartedAt: t0, FinishedAt: t0.Add(time.Second)}, {Name: "m"}}
	vs := rolloutViews([]*api.Rollout{done, running}, t0.Add(time.Minute))
	if vs[0].Name != "b-running" || vs[1].Name != "a-done" {
		t.Fatalf("order %s, %s; want the running one first", vs[0].Name, vs[1].Name)
	}
	if vs[0].ETA != "1s" || vs[1].ETA != "" {
		t.Errorf("ETAs %q, %q; want 1s for the running one, none for the finished one", vs[0].ETA, vs[1].ETA)
	}
}
