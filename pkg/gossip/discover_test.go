package gossip

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeWatcher is a mesh whose nodes the test sets. Like the mesh, it
// signals a change without waiting for anyone to take it: a waiter that
// reads the nodes before it looks at Changed may never take the signal.
type fakeWatcher struct {
	mu      sync.Mutex
	nodes   []NodeState
	changed chan struct{}
}

func (f *fakeWatcher) Nodes() []NodeState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.nodes)
}

func (f *fakeWatcher) Changed() <-chan struct{} { return f.changed }

func (f *fakeWatcher) set(n ...NodeState) {
	f.mu.Lock()
	f.nodes = n
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default: // one signal is pending already
	}
}

func voter(name, url string) NodeState {
	return NodeState{Name: name, State: Alive, Meta: Meta{Name: name, ClientURL: url, Health: HealthOK | HealthEtcd | HealthVoter}}
}

// TestAwaitEtcdEndpoints: the voters the mesh names, at once or once it
// names some (Waiting called once before); the fallback's endpoints when it
// fires and has some, else waiting goes on; ctx's error when it ends.
func TestAwaitEtcdEndpoints(t *testing.T) {
	ctx := t.Context()
	w := &fakeWatcher{nodes: []NodeState{voter("cp-2", "https://10.0.0.2:2379"), voter("cp-1", "https://10.0.0.1:2379")}, changed: make(chan struct{}, 1)}
	if eps, err := AwaitEtcdEndpoints(ctx, w, Discovery{Waiting: func() { t.Error("waiting with voters") }}); err != nil || !slices.Equal(eps, []string{"https://10.0.0.1:2379", "https://10.0.0.2:2379"}) {
		t.Fatalf("with voters: %v, %v", eps, err)
	}

	w = &fakeWatcher{nodes: []NodeState{{Name: "learner", State: Alive, Meta: Meta{ClientURL: "https://10.0.0.3:2379", Health: HealthOK | HealthEtcd}}}, changed: make(chan struct{}, 1)}
	waiting := make(chan struct{}, 2)
	fallback := make(chan time.Time)
	uses := make(chan []string)
	got := make(chan []string, 1)
	go func() {
		eps, err := AwaitEtcdEndpoints(ctx, w, Discovery{Waiting: func() { waiting <- struct{}{} }, Fallback: fallback, Use: func() []string { return <-uses }})
		if err != nil {
			t.Error(err)
		}
		got <- eps
	}()
	<-waiting
	fallback <- time.Time{}
	uses <- nil // no fallback endpoints: keep waiting
	w.set(voter("cp-1", "https://10.0.0.1:2379"))
	if eps := <-got; !slices.Equal(eps, []string{"https://10.0.0.1:2379"}) {
		t.Fatalf("after a voter appeared: %v", eps)
	}
	if len(waiting) != 0 {
		t.Error("Waiting called more than once")
	}

	w = &fakeWatcher{changed: make(chan struct{}, 1)}
	go func() {
		eps, _ := AwaitEtcdEndpoints(ctx, w, Discovery{Fallback: fallback, Use: func() []string { return <-uses }})
		got <- eps
	}()
	fallback <- time.Time{}
	uses <- []string{"https://10.0.0.9:2379"}
	if eps := <-got; !slices.Equal(eps, []string{"https://10.0.0.9:2379"}) {
		t.Fatalf("fallback: %v", eps)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := AwaitEtcdEndpoints(cctx, w, Discovery{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("after ctx ended: %v", err)
	}
}
