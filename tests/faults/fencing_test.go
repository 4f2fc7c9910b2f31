package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/failpoint"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestPausedLeaderFenced: the coordinator leader (c-cp-1) is paused
// (SIGSTOP) in the middle of a join, its learner not yet started (cp-4's
// agent exits at its failpoint before starting the member). Its 2 s
// session expires, c-cp-2 leads and finishes the join once cp-4's agent
// is back. Resumed (SIGCONT), c-cp-1 holds a stale operation in memory:
// it must not write it; no journal entry of c-cp-1 is dated after the
// pause, and the members are the ones c-cp-2 left.
func TestPausedLeaderFenced(t *testing.T) {
	s := newScenario(t, "paused coordinator leader, session expired, resumed: fenced", 4, 3)
	c := s.c
	c.startCoordinator(1)
	testwait.For(t, 30*time.Second, "c-cp-2 campaigning", func() (bool, string) {
		n, err := s.st.Names(t.Context(), store.ElectionPrefix)
		return err == nil && len(n) >= 2, fmt.Sprint(n)
	})
	s.waitLeader(10*time.Second, "c-cp-1")
	s.startWorkload(3, 3)

	c.startAgent(3, failpoint.Env+"="+failpoint.AgentBeforeLearnerStart)
	testwait.True(t, 60*time.Second, "cp-4's agent to exit at its failpoint", func() bool { ok, _ := c.nodes[3].agent.exited(); return ok })
	if _, code := c.nodes[3].agent.exited(); code != failpoint.ExitCode {
		t.Fatalf("cp-4's agent exited %d, want %d (the failpoint)", code, failpoint.ExitCode)
	}
	if err := c.nodes[0].coord.signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	s.waitLeader(30*time.Second, "c-cp-2")
	c.startAgent(3)
	c.waitVoters(s.cli, 90*time.Second, "cp-1", "cp-2", "cp-3", "cp-4")
	testwait.True(t, 30*time.Second, "the join journaled as done", func() bool {
		_, err := s.st.GetKV(t.Context(), store.ActiveOpKey)
		return errors.Is(err, store.ErrNotFound)
	})
	converged := time.Since(paused)
	membersBefore := memberList(t, s.cli)
	if err := c.nodes[0].coord.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	// Resumed, c-cp-1 finds its session gone and campaigns anew (or
	// exits): either way it is done acting as the leader.
	testwait.For(t, 30*time.Second, "c-cp-1 to campaign again or exit", func() (bool, string) {
		if ok, _ := c.nodes[0].coord.exited(); ok {
			return true, ""
		}
		n, err := s.st.Names(t.Context(), store.ElectionPrefix)
		return err == nil && len(n) >= 2, fmt.Sprint(n)
	})
	t.Logf("paused %s, resumed %s; c-cp-1's log ends:\n%s", paused.Format("15:04:05.000"), resumed.Format("15:04:05.000"), tail(c.nodes[0].coord.log, 6))
	// A resumed leader may plan a step before it notices its session is
	// gone; a change to etcd's membership or leadership it planned is
	// refused before it reaches etcd (store.Leads), so the members are
	// the ones the new leader left.
	for _, st := range stepsAfter(c.nodes[0].coord.log, resumed.Add(-50*time.Millisecond)) {
		t.Logf("the resumed leader planned a step after its session expired: %s", st)
	}
	if after := memberList(t, s.cli); after != membersBefore {
		t.Errorf("the members changed after the paused leader resumed:\n  before: %s\n  after:  %s", membersBefore, after)
	}
	if l := s.leader(); l != "c-cp-2" {
		t.Errorf("leader after the resume is %q, want c-cp-2", l)
	}
	ops, _, err := store.List[api.Operation](t.Context(), s.st, store.OpsDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		for _, e := range op.Status.History {
			if e.Leader == "c-cp-1" && e.At.After(paused) {
				t.Errorf("operation %s journaled by the paused leader after its pause: %+v", op.Metadata.Name, e)
			}
		}
	}
	s.finish(converged)
}

// memberList is etcd's member list, as "name:id:voter|learner ...".
func memberList(t *testing.T, cli *clientv3.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range resp.Members {
		kind := "voter"
		if m.IsLearner {
			kind = "learner"
		}
		out = append(out, fmt.Sprintf("%s:%x:%s", m.Name, m.ID, kind))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// stepsAfter returns the "step" lines of a coordinator's log dated after
// since.
func stepsAfter(logPath string, since time.Time) []string {
	b, _ := os.ReadFile(logPath)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		ts, rest, ok := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		if !ok || !strings.Contains(rest, "msg=step ") {
			continue
		}
		if at, err := time.Parse(time.RFC3339Nano, ts); err == nil && at.After(since) {
			out = append(out, line)
		}
	}
	return out
}
