package coordinator

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// declareExternal writes the EtcdCluster with external member ext (or
// none when declared is false), keeping what the stored one has besides.
func (h *execHarness) declareExternal(declared bool) {
	h.t.Helper()
	ec := api.NewEtcdCluster()
	if err := h.st.Get(h.t.Context(), store.EtcdClusterKey, ec); err != nil && !errors.Is(err, store.ErrNotFound) {
		h.t.Fatal(err)
	}
	ec.Spec.Members = nil
	if declared {
		ec.Spec.Members = []api.EtcdMemberSpec{{Name: "ext", Kind: api.MemberExternal, PeerURLs: []string{memPeerURL("ext")}, ClientURLs: []string{memClientURL("ext")}}}
	}
	h.put(store.EtcdClusterKey, ec)
}

// cluster reads the stored EtcdCluster.
func (h *execHarness) cluster() *api.EtcdCluster {
	h.t.Helper()
	ec := new(api.EtcdCluster)
	if err := h.st.Get(h.t.Context(), store.EtcdClusterKey, ec); err != nil {
		h.t.Fatal(err)
	}
	return ec
}

// until runs passes, a second apart, until done holds (a crashed leader is
// followed by a new one), and fails after 40.
func (h *execHarness) until(what string, done func() bool) {
	h.t.Helper()
	for i := range 40 {
		if done() {
			return
		}
		_, err := h.pass()
		h.now = h.now.Add(time.Second)
		if errors.Is(err, errCrash) {
			h.lead(fmt.Sprintf("leader-after-%s-%d", what, i))
			continue
		}
		if err != nil {
			h.t.Logf("pass: %v", err)
		}
	}
	h.t.Fatalf("%s: not after 40 passes", what)
}

// externalMember returns the fake's member at ext's peer URL, or nil.
func (h *execHarness) externalMember() *membership.Member {
	ms, _ := h.mem.Observe(h.t.Context())
	for i := range ms {
		if ms[i].PeerURLs[0] == memPeerURL("ext") {
			return &ms[i]
		}
	}
	return nil
}

// checkNoNodeRecords checks that nothing of a node was written for ext:
// an external member has no node, request, heartbeat or identity.
func (h *execHarness) checkNoNodeRecords() {
	h.t.Helper()
	for _, key := range []string{store.NodeKey("ext"), store.JoinKey("ext"), store.RemovalKey("ext"), store.HeartbeatKey("ext")} {
		resp, err := h.st.Client().Get(h.t.Context(), key)
		if err != nil {
			h.t.Fatal(err)
		}
		if len(resp.Kvs) != 0 {
			h.t.Fatalf("%s was written for an external member: %s", key, resp.Kvs[0].Value)
		}
	}
}

// recorded tells whether ext is recorded as on-boarded.
func (h *execHarness) recorded() bool {
	h.t.Helper()
	resp, err := h.st.Client().Get(h.t.Context(), store.ExternalMemberKey("ext"))
	if err != nil {
		h.t.Fatal(err)
	}
	return len(resp.Kvs) == 1
}

// TestExternalMemberOnAndOffBoarding runs an external member's on- and
// off-boarding pass by pass, with the leader crashing after each of the
// membership calls before the journal records it.
func TestExternalMemberOnAndOffBoarding(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	for _, crash := range []membership.Action{"", membership.AddLearner, membership.Promote, membership.RemoveMember} {
		t.Run("crash after "+string(crash), func(t *testing.T) {
			h := newExecHarness(t, cl)
			h.crashAt = crash
			h.declareExternal(true)

			// Added as a learner; its start values published.
			h.until("learner added", func() bool { return len(h.cluster().Status.External) == 1 })
			got := h.cluster().Status.External[0]
			m := h.externalMember()
			if m == nil || !m.Learner {
				t.Fatalf("external member %+v, want a learner", m)
			}
			for _, want := range []string{"ext=" + memPeerURL("ext"), "cp-0=" + memPeerURL("cp-0"), "cp-1=", "cp-2="} {
				if !strings.Contains(got.InitialCluster, want) {
					t.Fatalf("initial cluster %q lacks %q", got.InitialCluster, want)
				}
			}
			if got.Name != "ext" || got.InitialClusterState != "existing" {
				t.Fatalf("start values %+v", got)
			}
			if !h.recorded() {
				t.Fatal("the learner's addition was not recorded as an on-boarded external member")
			}

			// Started by hand with those values: promoted, values cleared.
			if err := h.mem.start(m.ID, "ext", memClientURL("ext")); err != nil {
				t.Fatal(err)
			}
			h.until("promoted", func() bool {
				m := h.externalMember()
				return m != nil && !m.Learner && len(h.cluster().Status.External) == 0
			})
			if got := h.cluster().Spec.Members; len(got) != 1 {
				t.Fatalf("spec changed by the status writes: %+v", got)
			}

			// Out of the spec: removed, record dropped.
			h.declareExternal(false)
			h.until("removed", func() bool { return h.externalMember() == nil && !h.recorded() })
			if got := h.voters(); strings.Join(got, ",") != "cp-0,cp-1,cp-2" {
				t.Fatalf("voters %v", got)
			}
			h.checkNoNodeRecords()
			if step, err := h.pass(); err != nil || step.Action != membership.None {
				t.Fatalf("after off-boarding: %s, %v; want None", step, err)
			}
			if crash != "" && !h.crashed {
				t.Fatalf("the leader never crashed after %s", crash)
			}
		})
	}
}

// TestExternalLearnerThatNeverStartsIsRemoved: the learner start timeout
// applies to an external member too, and its values are cleared.
func TestExternalLearnerThatNeverStartsIsRemoved(t *testing.T) {
	t.Parallel()
	h := newExecHarness(t, etcdtest.Start(t, 1))
	h.c.cfg.Policy.LearnerStartTimeout = 5 * time.Second
	h.declareExternal(true)
	h.until("learner added", func() bool { return len(h.cluster().Status.External) == 1 })
	var aborted bool
	h.until("aborted", func() bool {
		op, err := h.st.ActiveOp(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		aborted = aborted || op == nil
		return aborted && h.externalMember() == nil
	})
	// The next pass clears the values; the one after adds it again.
	h.until("cleared", func() bool { return len(h.cluster().Status.External) == 0 })
	h.checkNoNodeRecords()
}

// TestExternalStartsKeepTheRestOfTheObject: status.external is written by
// compare-and-swap; a write of the object by another writer in between is
// kept, spec and the rest of status alike.
func TestExternalStartsKeepTheRestOfTheObject(t *testing.T) {
	t.Parallel()
	h := newExecHarness(t, etcdtest.Start(t, 1))
	h.declareExternal(true)
	ctx := t.Context()
	calls := 0
	err := testMembershipDeps(h.c, h.fence).writeExternalStarts(ctx, func(cur []api.ExternalMemberStart) []api.ExternalMemberStart {
		calls++
		if calls == 1 {
			// Another writer (the status controller) writes meanwhile.
			ec := h.cluster()
			ec.Status.Leader, ec.Status.Voters = "cp-0", 3
			h.put(store.EtcdClusterKey, ec)
		}
		return append(cur, membership.ExternalStart("ext", "ext=x"))
	})
	if err != nil {
		t.Fatal(err)
	}
	ec := h.cluster()
	if calls != 2 || ec.Status.Leader != "cp-0" || ec.Status.Voters != 3 || len(ec.Spec.Members) != 1 || len(ec.Status.External) != 1 {
		t.Fatalf("after %d attempts: %+v", calls, ec)
	}
	// A deposed leader writes nothing.
	if _, err := h.st.Client().Delete(ctx, h.fence.Key); err != nil {
		t.Fatal(err)
	}
	err = testMembershipDeps(h.c, h.fence).writeExternalStarts(ctx, func([]api.ExternalMemberStart) []api.ExternalMemberStart { return nil })
	if !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("deposed write: %v, want ErrNotLeader", err)
	}
	if resp, err := h.st.Client().Get(ctx, store.EtcdClusterKey, clientv3.WithCountOnly()); err != nil || resp.Count != 1 {
		t.Fatalf("object: %v, %v", resp, err)
	}
	if len(h.cluster().Status.External) != 1 {
		t.Fatal("a deposed leader cleared status.external")
	}
}
