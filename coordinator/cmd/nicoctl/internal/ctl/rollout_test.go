package ctl

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
)

func TestRolloutLine(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := api.NewRollout("r1")
	if got, want := rolloutLine(r, t0), "r1 waiting for the coordinator leader to list the nodes it will roll"; got != want {
		t.Fatalf("unplanned: got %q\nwant %q", got, want)
	}
	r.Status = api.RolloutStatus{Phase: api.RolloutRunning, StartedAt: t0, Current: []string{"dp-3"},
		Nodes: []api.NodeProgress{{Name: "dp-1", Phase: api.NodeDone}, {Name: "dp-2", Phase: api.NodeDone}, {Name: "dp-3", Phase: api.NodeApplying}, {Name: "cp-1"}}}
	if got, want := rolloutLine(r, t0.Add(20*time.Second)), "r1 Running 2/4 nodes, current dp-3, elapsed 20s, about 20s left"; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if got := bar(r, 8); got != "[####....]" {
		t.Fatalf("bar %q", got)
	}
	// Between steps the line says what holds the rollout.
	r.Status.Current, r.Status.Message = nil, "membership: StartJoin cp-9 waits for\nthe one-change slot"
	if got, want := rolloutLine(r, t0.Add(20*time.Second)), "r1 Running 2/4 nodes, elapsed 20s, about 20s left; membership: StartJoin cp-9 waits for the one-change slot"; got != want {
		t.Fatalf("waiting: got %q\nwant %q", got, want)
	}
	if got := rolloutMessage(r); got != r.Status.Message {
		t.Fatalf("list message %q, want the journal's %q", got, r.Status.Message)
	}
	r.Status.Phase, r.Status.HaltedNode, r.Status.HaltedReason, r.Status.Current = api.RolloutHalted, "dp-3", "health check failed", nil
	if got := rolloutLine(r, t0.Add(30*time.Second)); !strings.HasSuffix(got, "halted at dp-3: health check failed") {
		t.Fatalf("halted line %q", got)
	}
}

func TestRolloutCommands(t *testing.T) {
	c := etcdtest.Start(t, 1)
	eps := c.Endpoints()
	st := newStore(t, c)

	run(t, eps, "rollout", "start", "r1", "--git-repo", "https://git.example/fleet", "--revision", "abc", "--max-unavailable", "25%").want(t, 0, []string{"rollout r1 started"}, nil)
	r := &api.Rollout{}
	if err := st.Get(t.Context(), store.RolloutKey("r1"), r); err != nil || r.Spec.Template.Revision != "abc" || r.Spec.MaxUnavailable != "25%" {
		t.Fatalf("%+v %v", r.Spec, err)
	}
	run(t, eps, "rollout", "start", "r1", "--git-repo", "x").want(t, ExitFailed, nil, []string{"exists"})
	run(t, eps, "rollout", "start", "r2", "--git-repo", "x", "--max-unavailable", "0").want(t, ExitUsage, nil, []string{"maxUnavailable"})
	run(t, eps, "rollout", "start", "r2", "--git-repo", "x", "--operation", "reboot").want(t, ExitUsage, nil, []string{"reboot"})
	spec := filepath.Join(t.TempDir(), "r.yaml")
	os.WriteFile(spec, []byte("template:\n  gitRepo: https://git.example/fleet\n  revision: def\ncontrolPlaneFirst: true\n"), 0o600)
	run(t, eps, "rollout", "start", "r2", "-f", spec).want(t, 0, nil, nil)
	os.WriteFile(spec, []byte("template:\n  gitRepo: x\n  colour: blue\n"), 0o600)
	run(t, eps, "rollout", "start", "r3", "-f", spec).want(t, ExitUsage, nil, []string{"colour"})

	run(t, eps, "rollout", "pause", "r1").want(t, 0, []string{"pause requested"}, nil)
	if err := st.Get(t.Context(), store.RolloutKey("r1"), r); err != nil || !r.Spec.Paused {
		t.Fatalf("not paused: %+v %v", r.Spec, err)
	}
	run(t, eps, "rollout", "resume", "r1").want(t, 0, nil, nil)
	run(t, eps, "rollout", "undo", "r1").want(t, 0, nil, nil)
	r = &api.Rollout{}
	if err := st.Get(t.Context(), store.RolloutKey("r1"), r); err != nil || r.Spec.Paused || !r.Spec.Undo {
		t.Fatalf("undo: %+v %v", r.Spec, err)
	}
	run(t, eps, "rollout", "status", "nope").want(t, ExitNotFound, nil, nil)

	// Status of a finished and of a halted rollout; -w ends with their outcome.
	r.Status = api.RolloutStatus{Phase: api.RolloutSucceeded, Nodes: []api.NodeProgress{{Name: "dp-1", Phase: api.NodeDone}}}
	r.Spec.Undo = false
	if err := st.Update(t.Context(), store.RolloutKey("r1"), r); err != nil {
		t.Fatal(err)
	}
	run(t, eps, "rollout", "status", "r1").want(t, 0, []string{"r1 Succeeded 1/1 nodes", "dp-1"}, nil)
	run(t, eps, "rollout", "status", "-w", "r1").want(t, 0, []string{"r1 Succeeded 1/1 nodes"}, nil)
	run(t, eps, "rollout", "pause", "r1").want(t, ExitFailed, nil, []string{"finished"})
	r2 := &api.Rollout{}
	if err := st.Get(t.Context(), store.RolloutKey("r2"), r2); err != nil {
		t.Fatal(err)
	}
	r2.Status = api.RolloutStatus{Phase: api.RolloutHalted, HaltedNode: "dp-2", HaltedReason: "boom", Nodes: []api.NodeProgress{{Name: "dp-2", Phase: api.NodeRollFailed}}}
	if err := st.Update(t.Context(), store.RolloutKey("r2"), r2); err != nil {
		t.Fatal(err)
	}
	// The newest rollout is the default.
	run(t, eps, "rollout", "status", "-w").want(t, ExitFailed, []string{"halted at dp-2: boom"}, []string{"halted"})
}

// lines hands each line written to it to a channel.
type lines struct {
	mu  sync.Mutex
	buf []byte
	ch  chan string
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.ch <- string(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
}

// TestRolloutStatusWatchFollowsChanges: status -w prints a line for each
// change as the rollout's key changes, and ends with its outcome.
func TestRolloutStatusWatchFollowsChanges(t *testing.T) {
	c := etcdtest.Start(t, 1)
	eps := c.Endpoints()
	st := newStore(t, c)
	r := api.NewRollout("r1")
	r.Spec.Template.GitRepo = "x"
	r.Status = api.RolloutStatus{Phase: api.RolloutRunning, Nodes: []api.NodeProgress{{Name: "dp-1"}, {Name: "dp-2"}}}
	if err := st.Create(t.Context(), store.RolloutKey("r1"), r); err != nil {
		t.Fatal(err)
	}
	out := &lines{ch: make(chan string, 16)}
	done := make(chan result, 1)
	go func() { done <- runTo(t, out, eps, "rollout", "status", "-w", "r1") }()
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-out.ch:
			if !strings.HasPrefix(got, want) {
				t.Fatalf("line %q, want %q", got, want)
			}
		case res := <-done:
			t.Fatalf("status -w ended (%d) before printing %q", res.code, want)
		case <-time.After(30 * time.Second):
			t.Fatalf("no line %q within 30s", want)
		}
	}
	update := func(fn func(*api.RolloutStatus)) {
		t.Helper()
		cur := &api.Rollout{}
		if err := st.Get(t.Context(), store.RolloutKey("r1"), cur); err != nil {
			t.Fatal(err)
		}
		fn(&cur.Status)
		if err := st.Update(t.Context(), store.RolloutKey("r1"), cur); err != nil {
			t.Fatal(err)
		}
	}
	expect("r1 Running 0/2 nodes")
	update(func(s *api.RolloutStatus) { s.Nodes[0].Phase = api.NodeDone; s.Current = []string{"dp-2"} })
	expect("r1 Running 1/2 nodes, current dp-2")
	update(func(s *api.RolloutStatus) {
		s.Nodes[1].Phase = api.NodeDone
		s.Current = nil
		s.Phase = api.RolloutSucceeded
	})
	expect("r1 Succeeded 2/2 nodes")
	if res := <-done; res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
}

// TestRolloutStartRefusesUnknownNodes: --nodes (or the spec file's nodes)
// naming a node that is not registered is refused, exit 2, naming it and
// the registered nodes, and no rollout is written.
func TestRolloutStartRefusesUnknownNodes(t *testing.T) {
	c := etcdtest.Start(t, 1)
	eps := c.Endpoints()
	st := newStore(t, c)
	registerNode(t, st, "cp-1", c.Members[0])
	registerNode(t, st, "cp-2", c.Members[0])

	run(t, eps, "rollout", "start", "r1", "--git-repo", "x", "--nodes", "cp-1,ghost-node,ghost-2").
		want(t, ExitUsage, nil, []string{"nodes", "ghost-node", "ghost-2", "not registered", "cp-1, cp-2"})
	spec := filepath.Join(t.TempDir(), "r.yaml")
	os.WriteFile(spec, []byte("template:\n  gitRepo: x\nnodes: [ghost-node]\n"), 0o600)
	run(t, eps, "rollout", "start", "r2", "-f", spec).want(t, ExitUsage, nil, []string{"ghost-node", "cp-1, cp-2"})
	for _, name := range []string{"r1", "r2"} {
		if err := st.Get(t.Context(), store.RolloutKey(name), &api.Rollout{}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("rollout %s after a refusal: %v, want not found", name, err)
		}
	}
	run(t, eps, "rollout", "start", "r1", "--git-repo", "x", "--nodes", "cp-2").want(t, ExitOK, []string{"rollout r1 started"}, nil)
}
