package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// drainAgent is a control-plane agent cp-1 on a real etcd, with its drains
// controller.
func drainAgent(t *testing.T) (*store.Store, controller.Controller) {
	t.Helper()
	return drainAgentWith(t, DrainConfig{Kubeconfig: "/k/admin.conf"})
}

// drainAgentWith is cp-1's drains controller on a real etcd, run with cfg.
func drainAgentWith(t *testing.T, cfg DrainConfig) (*store.Store, controller.Controller) {
	t.Helper()
	st := oneMemberStore(t)
	a := New(Config{Name: "cp-1", Roles: []api.Role{api.RoleControlPlane}, Drain: cfg}, nil, quietNotifier{}, logging.Test(t))
	a.use(st.Client(), st)
	return st, a.drains()
}

func askDrain(t *testing.T, st *store.Store, machine, runner string, attempt int, timeout time.Duration, command ...string) {
	t.Helper()
	r := api.NewDrainRequest(machine)
	_ = st.Get(t.Context(), store.DrainRequestKey(machine), r)
	r.Spec = api.DrainRequestSpec{Cluster: "k1", Machine: machine, Runner: runner, Command: command, Timeout: api.Duration(timeout), Attempt: attempt}
	if err := st.PutObject(t.Context(), r); err != nil {
		t.Fatal(err)
	}
}

func drainOf(t *testing.T, st *store.Store, machine string) *api.DrainRequest {
	t.Helper()
	r := api.NewDrainRequest(machine)
	if err := st.Get(t.Context(), store.DrainRequestKey(machine), r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDrainRunsRealCommands: the runner's agent runs the drain command of
// a request asked of it as a real process, with NICO_DRAIN_NODE and
// KUBECONFIG set, and records exit 0 as Succeeded; a command that fails
// is Failed with its exit code and output's tail; one that hangs past its
// timeout is killed, with its children, and recorded as timed out; a
// request of another runner, and an answered one, are not run.
func TestDrainRunsRealCommands(t *testing.T) {
	st, ctrl := drainAgent(t)
	ctx := t.Context()
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	sh := func(script string) []string { return []string{"/bin/sh", "-c", "echo run >> " + runs + "; " + script} }

	askDrain(t, st, "dp-1", "cp-1", 1, time.Minute, sh(`echo "draining $NICO_DRAIN_NODE of $NICO_DRAIN_CLUSTER with $KUBECONFIG"`)...)
	askDrain(t, st, "dp-2", "cp-1", 1, time.Minute, sh(`echo "node $NICO_DRAIN_NODE"; echo "cannot evict pod web-1" >&2; exit 3`)...)
	childPID := filepath.Join(dir, "child.pid")
	askDrain(t, st, "dp-3", "cp-1", 1, 300*time.Millisecond, sh(`echo started; sleep 1000 & echo $! > `+childPID+`; wait`)...)
	askDrain(t, st, "dp-4", "cp-2", 1, time.Minute, sh("exit 0")...)
	askDrain(t, st, "dp-5", "cp-1", 1, time.Minute, "/bin/echo", "node=$NICO_DRAIN_NODE", "cluster=${NICO_DRAIN_CLUSTER}", "$HOME")
	t0 := time.Now()
	if err := ctrl.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)

	ok := drainOf(t, st, "dp-1")
	if !ok.Answered() || ok.Status.Phase != api.DrainSucceeded || ok.Status.ExitCode != 0 || ok.Status.Runner != "cp-1" ||
		!strings.Contains(ok.Status.Output, "draining dp-1 of k1 with /k/admin.conf") || ok.Status.FinishedAt.IsZero() {
		t.Errorf("succeeding drain: %+v", ok.Status)
	}
	bad := drainOf(t, st, "dp-2")
	if bad.Status.Phase != api.DrainFailed || bad.Status.ExitCode != 3 || bad.Status.TimedOut ||
		!strings.Contains(bad.Status.Output, "node dp-2") || !strings.Contains(bad.Status.Output, "cannot evict pod web-1") {
		t.Errorf("failing drain: %+v", bad.Status)
	}
	hung := drainOf(t, st, "dp-3")
	if hung.Status.Phase != api.DrainFailed || !hung.Status.TimedOut || !strings.Contains(hung.Status.Output, "started") || !strings.Contains(hung.Status.Message, "timeout") {
		t.Errorf("hanging drain: %+v", hung.Status)
	}
	t.Logf("the three drains took %s; the hanging one (timeout 300ms) ran %s", took, hung.Status.FinishedAt.Sub(hung.Status.StartedAt))
	if took > 10*time.Second {
		t.Errorf("the three drains took %s: the hanging one was not cut at its 300ms timeout", took)
	}
	b, err := os.ReadFile(childPID)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	testwait.For(t, 5*time.Second, "the hanging drain's child killed", func() (bool, string) {
		err := syscall.Kill(pid, 0)
		return errors.Is(err, syscall.ESRCH), "child " + strconv.Itoa(pid) + " still there"
	})
	if r := drainOf(t, st, "dp-5"); r.Status.Phase != api.DrainSucceeded || strings.TrimSpace(r.Status.Output) != "node=dp-5 cluster=k1 $HOME" {
		t.Errorf("a command run with no shell, its arguments expanded: %+v", r.Status)
	}
	if other := drainOf(t, st, "dp-4"); other.Status.Phase != "" {
		t.Errorf("another runner's request was run: %+v", other.Status)
	}

	// Answered requests are not run again; a new attempt is.
	if err := ctrl.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countRuns(t, runs); n != 3 {
		t.Fatalf("%d shell runs after a second pass, want 3", n)
	}
	askDrain(t, st, "dp-2", "cp-1", 2, time.Minute, sh(`echo fixed`)...)
	if err := ctrl.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if r := drainOf(t, st, "dp-2"); r.Status.Attempt != 2 || r.Status.Phase != api.DrainSucceeded || !strings.Contains(r.Status.Output, "fixed") {
		t.Errorf("retried drain: %+v", r.Status)
	}
	if n := countRuns(t, runs); n != 4 {
		t.Fatalf("%d runs after the retry, want 4", n)
	}
}

// TestDrainResultDroppedWhenTheRequestChanged: the leader asks a new
// attempt while the runner runs the old one; the old one's result is not
// written over the new attempt, which runs next.
func TestDrainResultDroppedWhenTheRequestChanged(t *testing.T) {
	st, ctrl := drainAgent(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	started, release := filepath.Join(dir, "started"), filepath.Join(dir, "release")
	askDrain(t, st, "dp-1", "cp-1", 1, time.Minute, "/bin/sh", "-c", "touch "+started+"; while [ ! -e "+release+" ]; do sleep 0.05; done; echo old")
	done := make(chan error, 1)
	go func() { done <- ctrl.Reconcile(ctx) }()
	testwait.For(t, 30*time.Second, "the first attempt running", func() (bool, string) {
		_, err := os.Stat(started)
		return err == nil, "not started"
	})
	if r := drainOf(t, st, "dp-1"); r.Status.Phase != api.DrainRunning || r.Status.Attempt != 1 {
		t.Fatalf("while it runs: %+v", r.Status)
	}
	askDrain(t, st, "dp-1", "cp-1", 2, time.Minute, "/bin/sh", "-c", "echo new")
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r := drainOf(t, st, "dp-1"); r.Answered() || strings.Contains(r.Status.Output, "old") {
		t.Fatalf("the old attempt's result landed on attempt 2: %+v", r.Status)
	}
	if err := ctrl.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if r := drainOf(t, st, "dp-1"); !r.Answered() || r.Status.Phase != api.DrainSucceeded || !strings.Contains(r.Status.Output, "new") {
		t.Fatalf("attempt 2: %+v", r.Status)
	}
}

func countRuns(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "run\n")
}

// TestDrainRunningAfterARestartRunsAgain: a request this machine's agent
// marked Running but never answered (the agent died in it) is run again
// by the next agent process.
func TestDrainRunningAfterARestartRunsAgain(t *testing.T) {
	st, ctrl := drainAgent(t)
	askDrain(t, st, "dp-1", "cp-1", 1, time.Minute, "/bin/sh", "-c", "echo again")
	r := drainOf(t, st, "dp-1")
	r.Status = api.DrainRequestStatus{Attempt: 1, Runner: "cp-1", Phase: api.DrainRunning, StartedAt: time.Now().UTC()}
	if err := st.UpdateObject(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if err := ctrl.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := drainOf(t, st, "dp-1"); r.Status.Phase != api.DrainSucceeded || !strings.Contains(r.Status.Output, "again") {
		t.Fatalf("after the restart: %+v", r.Status)
	}
}

// TestDrainKeepsTheConfiguredTail: the agent keeps the last
// DrainConfig.OutputTail bytes of a command's output (drain.outputTail),
// DrainTail when unset.
func TestDrainKeepsTheConfiguredTail(t *testing.T) {
	for _, tc := range []struct{ tail, want int }{{300, 300}, {0, DrainTail}} {
		st, ctrl := drainAgentWith(t, DrainConfig{Kubeconfig: "/k/admin.conf", OutputTail: tc.tail})
		askDrain(t, st, "dp-1", "cp-1", 1, time.Minute, "/bin/sh", "-c", `head -c 5000 /dev/zero | tr '\0' x; echo END`)
		if err := ctrl.Reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
		r := drainOf(t, st, "dp-1")
		if out := r.Status.Output; len(out) != tc.want || !strings.HasSuffix(out, "xEND\n") {
			t.Errorf("OutputTail %d: kept %d bytes ending %q, want the last %d", tc.tail, len(out), out[max(0, len(out)-8):], tc.want)
		}
	}
}
