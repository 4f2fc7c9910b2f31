package integration

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// TestConcurrentJoinsAreSerialized: three nodes ask to join at the same
// moment; the journal shows one operation at a time and the member list
// never holds two learners.
func TestConcurrentJoinsAreSerialized(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	f.SetVoters(5) // every host a voter: four of them
	f.StartCoordinator("c-1")
	mon := f.watchLearners()
	for _, n := range []string{"cp-2", "cp-3", "cp-4"} {
		f.Start(f.AgentConfig(n, false))
	}
	f.WaitVoters(90*time.Second, "cp-1", "cp-2", "cp-3", "cp-4")
	if max := mon(); max > 1 {
		t.Fatalf("saw %d learners at once", max)
	}
	for _, n := range f.Nodes() {
		name := n.Name
		testwait.For(t, 10*time.Second, name+" ready", func() (bool, string) {
			ready, err := n.Notify.ReadyState()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return ready == 1, fmt.Sprintf("READY sent %d times", ready)
		})
	}
	ops := f.ops()
	if len(ops) != 3 {
		t.Fatalf("journal has %d operations, want 3 joins", len(ops))
	}
	assertSerialized(t, ops)
}

// assertSerialized fails if any two operations' lifetimes overlap.
func assertSerialized(t *testing.T, ops []*api.Operation) {
	t.Helper()
	sort.Slice(ops, func(i, j int) bool { return ops[i].Metadata.CreatedAt.Before(ops[j].Metadata.CreatedAt) })
	for i := range ops {
		if ops[i].Status.Phase == api.OpRunning && i != len(ops)-1 {
			t.Fatalf("op %s still running while a later one exists", ops[i].Metadata.Name)
		}
		if i == 0 {
			continue
		}
		prevEnd := ops[i-1].Status.UpdatedAt
		if ops[i].Metadata.CreatedAt.Before(prevEnd) {
			t.Fatalf("op %s started at %s before %s ended at %s", ops[i].Metadata.Name, ops[i].Metadata.CreatedAt, ops[i-1].Metadata.Name, prevEnd)
		}
	}
}

// watchLearners polls the member list until the returned func is called,
// which returns the most learners seen at once.
func (f *fleet) watchLearners() func() int {
	cli := f.Client()
	ctx, cancel := context.WithCancel(context.Background())
	max := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			c, cc := context.WithTimeout(ctx, time.Second)
			resp, err := cli.MemberList(c)
			cc()
			if err == nil {
				n := 0
				for _, m := range resp.Members {
					if m.IsLearner {
						n++
					}
				}
				if n > max {
					max = n
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	f.t.Cleanup(cancel)
	return func() int { cancel(); <-done; return max }
}

// ops reads the operation journal.
func (f *fleet) ops() []*api.Operation {
	f.t.Helper()
	st := f.Store()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ops, _, err := store.List[api.Operation](ctx, st, store.OpsDir)
	if err != nil {
		f.t.Fatal(err)
	}
	return ops
}
