package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/tests/fleetkit"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// journalEvent is one change, seen by a watch, of the operation journal
// (store.OpsDir, store.ActiveOpKey) or of the liveness record.
type journalEvent struct {
	rev int64
	key string // under store.DefaultPrefix
	put bool
	// states is the liveness record's node states (liveness puts only).
	states map[string]string
}

func (e journalEvent) String() string {
	if e.key == store.LivenessKey {
		return fmt.Sprintf("%d liveness %v", e.rev, e.states)
	}
	verb := "put"
	if !e.put {
		verb = "delete"
	}
	return fmt.Sprintf("%d %s %s", e.rev, verb, e.key)
}

func (e journalEvent) isOp() bool {
	return e.key == store.ActiveOpKey || strings.HasPrefix(e.key, store.OpsDir)
}

// journalEvents are in revision order.
type journalEvents []journalEvent

// journalWatch records every journalEvent from its start, with no gap: an
// etcd watch from a revision delivers each change after it.
type journalWatch struct {
	mu     sync.Mutex
	events journalEvents
	err    error
	cancel context.CancelFunc
	done   chan struct{}
}

// watchJournal starts recording the journal and liveness changes after the
// current revision.
func watchJournal(t *testing.T, cli *clientv3.Client) *journalWatch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, store.DefaultPrefix+store.LivenessKey)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(context.Background())
	w := &journalWatch{cancel: wcancel, done: make(chan struct{})}
	fail := func(err error) {
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
	}
	go func() {
		defer close(w.done)
		// A watch etcd cancels (its member restarting under the client)
		// is opened again from the next revision: no event is lost.
		next := resp.Header.Revision + 1
		for wctx.Err() == nil {
			ch := cli.Watch(wctx, store.DefaultPrefix, clientv3.WithPrefix(), clientv3.WithRev(next))
			for r := range ch {
				if r.Canceled && r.CompactRevision == 0 && wctx.Err() == nil {
					break
				}
				if err := r.Err(); err != nil {
					fail(err)
					return
				}
				for _, ev := range r.Events {
					e := journalEvent{rev: ev.Kv.ModRevision, key: strings.TrimPrefix(string(ev.Kv.Key), store.DefaultPrefix), put: ev.Type == mvccpb.PUT}
					next = ev.Kv.ModRevision + 1
					switch {
					case e.key == store.LivenessKey && e.put:
						var l api.Liveness
						if err := json.Unmarshal(ev.Kv.Value, &l); err != nil {
							fail(fmt.Errorf("liveness record at rev %d: %w", e.rev, err))
							return
						}
						e.states = map[string]string{}
						for n, s := range l.Status.Nodes {
							e.states[n] = s.State
						}
					case e.isOp():
					default:
						continue
					}
					w.mu.Lock()
					w.events = append(w.events, e)
					w.mu.Unlock()
				}
			}
		}
	}()
	t.Cleanup(func() { wcancel(); <-w.done })
	return w
}

// stop ends the watch and returns what it saw; a watch that failed fails
// the test (it would have missed changes).
func (w *journalWatch) stop(t *testing.T) journalEvents {
	t.Helper()
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		t.Fatalf("journal watch: %v", w.err)
	}
	return slices.Clone(w.events)
}

// revWindow is the revisions from the liveness record's first entry with
// a node in one state to its first later entry with it in another.
type revWindow struct{ start, end int64 }

// window finds the first liveness record with node in from, and the first
// after it with node in to.
func (ev journalEvents) window(t *testing.T, node, from, to string) revWindow {
	t.Helper()
	var w revWindow
	for _, e := range ev {
		if e.key != store.LivenessKey {
			continue
		}
		switch {
		case w.start == 0 && e.states[node] == from:
			w.start = e.rev
		case w.start != 0 && e.states[node] == to:
			w.end = e.rev
			return w
		}
	}
	t.Fatalf("the liveness record never had %s %s then %s: %v", node, from, to, ev)
	return w
}

// noOpsBefore fails on any change to the operation journal before rev:
// nothing was pending but the join the test holds up.
func (ev journalEvents) noOpsBefore(t *testing.T, rev int64, while string) {
	t.Helper()
	for _, e := range ev {
		if e.isOp() && e.rev < rev {
			t.Errorf("the operation journal changed while %s (before rev %d): %s; events: %v", while, rev, e, ev)
		}
	}
}

// noOpStartedWhileSuspect fails when an operation was started (the active
// operation key written) while the liveness record last written before it,
// in watch order, had some node suspect: the leader writes the liveness it
// plans with before the step, or first in the step's own transaction, so
// that record is what the step was planned on.
func (ev journalEvents) noOpStartedWhileSuspect(t *testing.T) {
	t.Helper()
	var live map[string]string
	for _, e := range ev {
		switch {
		case e.key == store.LivenessKey:
			live = e.states
		case e.key == store.ActiveOpKey && e.put:
			for n, s := range live {
				if s == "suspect" {
					t.Errorf("an operation was started at rev %d while the liveness record had %s suspect (%v)", e.rev, n, live)
				}
			}
		}
	}
}

// opStartedFrom tells whether an operation was started at rev or after:
// a start planned on the record written at rev goes in that record's
// transaction, after it (coordinator/reconciler.go, once).
func (ev journalEvents) opStartedFrom(rev int64) bool {
	return slices.ContainsFunc(ev, func(e journalEvent) bool { return e.key == store.ActiveOpKey && e.put && e.rev >= rev })
}

// noOpsWhile checks that no operation was journaled before cp-2 went from
// state from back to alive (the window's end), and returns that revision.
func (ev journalEvents) noOpsWhile(t *testing.T, from, while string) int64 {
	t.Helper()
	win := ev.window(t, "cp-2", from, "alive")
	t.Logf("cp-2 %s from rev %d to rev %d; journal and liveness changes: %v", from, win.start, win.end, ev)
	ev.noOpsBefore(t, win.end, while)
	return win.end
}

// opsOnlyAfter is noOpsWhile, checks that no operation started while the
// liveness record had a node suspect, and that one started once cp-2 was
// alive again.
func (ev journalEvents) opsOnlyAfter(t *testing.T, from, while string) {
	t.Helper()
	end := ev.noOpsWhile(t, from, while)
	ev.noOpStartedWhileSuspect(t)
	if !ev.opStartedFrom(end) {
		t.Fatalf("no operation was started once cp-2 was alive again (rev %d); events: %v", end, ev)
	}
}

// votersOnly accepts a member list of voters cp-1 and cp-2 alone.
func votersOnly(ms map[string]bool) bool { return len(ms) == 2 && votersIn(ms, "cp-1", "cp-2") }

// votersIn tells whether the named members are in ms as voters.
func votersIn(ms map[string]bool, names ...string) bool {
	for _, n := range names {
		if learner, ok := ms[n]; !ok || learner {
			return false
		}
	}
	return true
}

// memberPoller reads etcd's member list over a window and remembers any
// list that is not as it wants.
type memberPoller struct {
	cancel context.CancelFunc
	done   chan struct{}
	bad    []string
	polls  int
}

// pollMembers polls the member list (name -> learner) every 100 ms until
// stop; a list that want refuses is remembered.
func pollMembers(t *testing.T, cli *clientv3.Client, want func(map[string]bool) bool) *memberPoller {
	ctx, cancel := context.WithCancel(context.Background())
	p := &memberPoller{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
			ms, err := fleetkit.Members(cctx, cli)
			ccancel()
			if err == nil {
				p.polls++
				if !want(ms) {
					p.bad = append(p.bad, fmt.Sprint(ms))
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-p.done })
	return p
}

// stop ends the polling and fails on any change of the members seen.
func (p *memberPoller) stop(t *testing.T, while string) {
	t.Helper()
	p.cancel()
	<-p.done
	if len(p.bad) > 0 {
		t.Errorf("etcd's members changed %s: %v", while, p.bad)
	}
	t.Logf("member list read %d times %s, unchanged", p.polls, while)
}
