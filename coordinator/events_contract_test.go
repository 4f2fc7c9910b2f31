package coordinator

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/events"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
)

// TestJournalLinesAreNamedEvents: pkg/events names an operation's steps
// from the lines the executor journals; every line of a join and of a
// removal, also when a new leader finishes what a crashed one started, is
// a named event (none is left an OpStep), in the flow's order.
func TestJournalLinesAreNamedEvents(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	for _, tc := range []struct {
		scenario string
		crashAt  membership.Action
		want     string
	}{
		{"join", "", "JoinStarted LearnerAdded Promoted Joined"},
		// The leader crashed after promoting, before journaling it: the
		// next one journals the voter it finds, and Joined tells it.
		{"join", membership.Promote, "JoinStarted LearnerAdded Joined"},
		{"remove", "", "RemovalStarted LeadershipMoved RemovingMember Removed"},
		{"remove", membership.RemoveMember, "RemovalStarted LeadershipMoved RemovingMember Removed"},
	} {
		t.Run(tc.scenario+"/"+string(tc.crashAt), func(t *testing.T) {
			h := newExecHarness(t, cl)
			h.crashAt = tc.crashAt
			h.converge(h.file(tc.scenario))
			kvs, _, err := h.st.ListKVs(t.Context(), store.OpsDir)
			if err != nil || len(kvs) != 1 {
				t.Fatalf("operations %d, %v: want one", len(kvs), err)
			}
			evs, err := events.Derive(events.Change{Key: string(kvs[0].Key), Cur: kvs[0].Value, Revision: kvs[0].ModRevision})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range evs {
				if e.Reason == events.LearnerProgress {
					continue // as often as the learner was seen catching up
				}
				if !slices.Contains(got, e.Reason) || e.Reason == events.OpStep {
					got = append(got, e.Reason)
				}
			}
			if strings.Join(got, " ") != tc.want {
				op := &api.Operation{}
				_ = json.Unmarshal(kvs[0].Value, op)
				t.Fatalf("events %s, want %s; journal %+v", strings.Join(got, " "), tc.want, op.Status.History)
			}
		})
	}
}
