package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/fleetkit"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// TestLearnerThatNeverStartsIsRemoved: the new node's member cannot start;
// after the start timeout the leader removes the learner and tells the node
// to wipe and retry; once the member can start, the node joins.
func TestLearnerThatNeverStartsIsRemoved(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.Policy.LearnerStartTimeout = 3 * time.Second
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	f.StartCoordinator("c-1")
	rt := &failing{Runtime: f.NewRuntime()}
	rt.fail.Store(true)
	f.StartWith(f.AgentConfig("cp-2", false), rt)

	j := waitObj[api.JoinRequest](f, 60*time.Second, store.JoinKey("cp-2"), "second join attempt", func(j *api.JoinRequest) bool { return j.Spec.Attempt >= 2 })
	var failed *api.Operation
	for _, op := range f.ops() {
		if op.Status.Phase == api.OpFailed {
			failed = op
		}
	}
	if failed == nil || !strings.Contains(failed.Status.Message, "did not start within 3s") {
		t.Fatalf("no failed join op with the timeout reason; ops: %+v", f.ops())
	}
	// The learner is gone: only cp-1 is a member.
	ms, err := fleetkit.Members(t.Context(), f.Client())
	if err != nil {
		t.Fatal(err)
	}
	for name := range ms {
		if name != "cp-1" && !strings.HasPrefix(name, "unstarted-") {
			t.Fatalf("unexpected member %s", name)
		}
	}
	rt.fail.Store(false)
	f.WaitVoters(60*time.Second, "cp-1", "cp-2")
	t.Logf("joined at attempt %d after %d start attempts", j.Spec.Attempt, rt.starts.Load())
}

// TestLearnerRemovedAfterItStartedJoinsAgain: the new node's learner is
// removed once its member runs, before its promotion, as the leader does
// to a learner that started just after its start timeout (AbortJoin) and
// as an operator's etcdctl does. The member finds itself removed; that
// ends the attempt, not the node: the agent wipes the member's data and
// follows the leader's answer (the request failed, to be tried again) to
// a second attempt that joins. No coordinator runs while the learner
// starts and is removed, so that it is not promoted first.
func TestLearnerRemovedAfterItStartedJoinsAgain(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	c1 := f.StartCoordinator("c-1")
	cfg := f.AgentConfig("cp-2", false)
	rt := &gated{Runtime: f.NewRuntime(), open: make(chan struct{})}
	n := f.StartWith(cfg, rt)
	added := waitObj[api.JoinRequest](f, 60*time.Second, store.JoinKey("cp-2"), "learner added", func(j *api.JoinRequest) bool { return j.Status.Phase == api.JoinLearnerAdded })
	c1.Stop()
	close(rt.open)
	// The learner runs once it has published its name.
	testwait.For(t, 60*time.Second, "learner cp-2 started", func() (bool, string) {
		ms, err := fleetkit.Members(t.Context(), f.Client())
		if err != nil {
			return false, err.Error()
		}
		learner, ok := ms["cp-2"]
		return ok && learner, fmt.Sprint(ms)
	})
	if _, err := f.Client().MemberRemove(t.Context(), uint64(added.Status.MemberID)); err != nil {
		t.Fatalf("remove the learner: %v", err)
	}
	f.StartCoordinator("c-2")
	f.WaitVoters(90*time.Second, "cp-1", "cp-2")
	final := waitObj[api.JoinRequest](f, 10*time.Second, store.JoinKey("cp-2"), "joined", func(j *api.JoinRequest) bool { return j.Status.Phase == api.JoinJoined })
	if final.Spec.Attempt < 2 || final.Status.MemberID == added.Status.MemberID {
		t.Fatalf("joined as member %s at attempt %d, want a new member at attempt 2 or later (the removed learner was %s)", final.Status.MemberID, final.Spec.Attempt, added.Status.MemberID)
	}
	select {
	case err := <-n.Done:
		n.Done <- err
		t.Fatalf("agent returned %v", err)
	default:
	}
	copies, _ := filepath.Glob(cfg.DataDir + ".wiped-*")
	if len(copies) == 0 {
		t.Fatalf("no wiped copy of the removed learner's data beside %s", cfg.DataDir)
	}
}

// TestAgentKilledMidJoinRecovers: the agent dies after the learner was added
// and before its member started; a new agent with the same data dir resumes
// the same join.
func TestAgentKilledMidJoinRecovers(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	f.StartCoordinator("c-1")
	cfg := f.AgentConfig("cp-2", false)
	rt := &gated{Runtime: f.NewRuntime(), open: make(chan struct{})}
	n := f.StartWith(cfg, rt)
	j := waitObj[api.JoinRequest](f, 60*time.Second, store.JoinKey("cp-2"), "learner added", func(j *api.JoinRequest) bool { return j.Status.Phase == api.JoinLearnerAdded })
	if err := n.Stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("agent stop: %v", err)
	}
	f.Start(cfg)
	f.WaitVoters(60*time.Second, "cp-1", "cp-2")
	final := waitObj[api.JoinRequest](f, 10*time.Second, store.JoinKey("cp-2"), "joined", func(j *api.JoinRequest) bool { return j.Status.Phase == api.JoinJoined })
	if final.Status.MemberID != j.Status.MemberID || final.Spec.Attempt != 1 {
		t.Fatalf("join resumed as member %s attempt %d, want the learner %s of attempt 1", final.Status.MemberID, final.Spec.Attempt, j.Status.MemberID)
	}
}

// TestRemovedNodeRejoinsWithNewID: a node is removed while its agent is
// down; restarted on its old data dir, the agent sees that its member is
// gone, wipes the data (keeping a copy) and joins with a new member ID.
func TestRemovedNodeRejoinsWithNewID(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	f.StartCoordinator("c-1")
	f.Start(f.AgentConfig("cp-2", false))
	cfg3 := f.AgentConfig("cp-3", false)
	n3 := f.Start(cfg3)
	f.WaitVoters(90*time.Second, "cp-1", "cp-2", "cp-3")
	old := waitObj[api.JoinRequest](f, 10*time.Second, store.JoinKey("cp-3"), "joined", func(j *api.JoinRequest) bool { return j.Status.Phase == api.JoinJoined }).Status.MemberID

	_ = n3.Stop()
	f.requestRemoval("cp-3", false)
	waitObj[api.RemoveRequest](f, 60*time.Second, store.RemovalKey("cp-3"), "removal done", func(r *api.RemoveRequest) bool { return r.Status.Phase == api.RemoveDone })
	f.WaitVoters(30*time.Second, "cp-1", "cp-2")

	cfg3.Endpoints = f.Endpoints()
	f.Start(cfg3)
	f.WaitVoters(90*time.Second, "cp-1", "cp-2", "cp-3")
	now := waitObj[api.JoinRequest](f, 10*time.Second, store.JoinKey("cp-3"), "rejoined", func(j *api.JoinRequest) bool { return j.Status.Phase == api.JoinJoined }).Status.MemberID
	if now == old || now == 0 {
		t.Fatalf("rejoined as %s, old member was %s: want a new ID", now, old)
	}
	copies, _ := filepath.Glob(cfg3.DataDir + ".wiped-*")
	if len(copies) != 1 {
		t.Fatalf("want one kept copy of the stale data dir, got %v", copies)
	}
	if _, err := os.Stat(filepath.Join(copies[0], "member")); err != nil {
		t.Fatalf("kept copy has no member data: %v", err)
	}
}

// requestRemoval files a removal request as nicoctl does.
func (f *fleet) requestRemoval(node string, force bool) {
	f.t.Helper()
	r := api.NewRemoveRequest(node)
	r.Metadata.CreatedAt = time.Now()
	r.Spec.Force = force
	if err := f.Store().Put(f.t.Context(), store.RemovalKey(node), r); err != nil {
		f.t.Fatal(err)
	}
}

// slowReturn starts the member at once but returns from Start only when
// release is closed: the member can be promoted, and even removed, while
// its agent is still joining.
type slowReturn struct {
	member.Runtime
	release chan struct{}
}

func (r *slowReturn) Start(ctx context.Context, cfg member.Config) error {
	if err := r.Runtime.Start(ctx, cfg); err != nil {
		return err
	}
	select {
	case <-r.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestRemovedWhileJoining: the node's member is promoted and then removed
// while its agent is still in its join; the agent must stop as removed and
// not file a new join request.
func TestRemovedWhileJoining(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	f.StartCoordinator("c-1")
	rt := &slowReturn{Runtime: f.NewRuntime(), release: make(chan struct{})}
	n := f.StartWith(f.AgentConfig("cp-2", false), rt)
	f.WaitVoters(60*time.Second, "cp-1", "cp-2")
	f.requestRemoval("cp-2", false)
	waitObj[api.RemoveRequest](f, 60*time.Second, store.RemovalKey("cp-2"), "removal done", func(r *api.RemoveRequest) bool { return r.Status.Phase == api.RemoveDone })
	close(rt.release)
	select {
	case err := <-n.Done:
		n.Done <- err
		if !errors.Is(err, agent.ErrRemoved) {
			t.Fatalf("agent returned %v, want ErrRemoved", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("agent removed while joining did not stop")
	}
	if err := f.Store().Get(t.Context(), store.JoinKey("cp-2"), &api.JoinRequest{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a join request is back after the removal: %v", err)
	}
}
