package coordinator

import (
	"errors"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

func TestBootstrapClusterVoters(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ voters, want int }{
		{0, 3}, {1, 3}, {2, 3}, {3, 3}, {4, 5}, {5, 5}, {6, 7}, {7, 7}, {9, 7},
	} {
		var ms []membership.Member
		for i := range tt.voters {
			ms = append(ms, membership.Member{ID: api.MemberID(i + 1)})
		}
		ms = append(ms, membership.Member{ID: 100, Learner: true})
		if got := (membershipDeps{}).bootstrapCluster(time.Unix(0, 0), ms).Spec.Voters; got != tt.want {
			t.Errorf("%d voters and a learner: bootstrap voters %d, want %d", tt.voters, got, tt.want)
		}
	}
}

func TestPolicyOf(t *testing.T) {
	t.Parallel()
	fallback := membership.Policy{LearnerStartTimeout: time.Minute, LearnerProgressTimeout: 2 * time.Minute, ReplaceDeadMembersAfter: time.Hour}
	got := policyOf(api.EtcdPolicy{LearnerStartTimeout: api.Duration(5 * time.Second)}, fallback)
	want := membership.Policy{LearnerStartTimeout: 5 * time.Second, LearnerProgressTimeout: 2 * time.Minute}
	if got != want {
		t.Fatalf("policyOf = %+v, want %+v (an unset replacement is off: zero means never)", got, want)
	}
}

// TestTheStoredEtcdClusterOutlivesItsWriter: the first leader writes the
// EtcdCluster from its settings; a next leader with other settings plans
// with the stored object and does not overwrite it.
func TestTheStoredEtcdClusterOutlivesItsWriter(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	st, err := store.New(etcdtest.NewClient(t, cl.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	first := startCandidate(t, cl, "a", 60*time.Second, withLearnerStart(7*time.Second))
	var ec api.EtcdCluster
	testwait.For(t, 20*time.Second, "the bootstrap EtcdCluster", func() (bool, string) {
		err := st.Get(t.Context(), store.EtcdClusterKey, &ec)
		return err == nil, "get: " + errString(err)
	})
	if ec.Spec.Voters != api.DefaultVoters || time.Duration(ec.Spec.Policy.LearnerStartTimeout) != 7*time.Second {
		t.Fatalf("bootstrap spec %+v: want %d voters and the writer's 7s learner start timeout", ec.Spec, api.DefaultVoters)
	}
	rev := ec.Metadata.Revision
	first.stop(t)
	second := startCandidate(t, cl, "b", 60*time.Second, withLearnerStart(9*time.Second))
	defer second.stop(t)
	waitLeader(t, st, 20*time.Second, func(n string) bool { return n == "b" })
	d := testMembershipDeps(second.c, store.Fence{})
	obs, err := observe(t.Context(), st, second.c.admin.Observe)
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.ensureCluster(t.Context(), obs, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Its status writer may have moved the revision since: the spec is
	// what must be the first writer's.
	if got.Metadata.Revision < rev || time.Duration(got.Spec.Policy.LearnerStartTimeout) != 7*time.Second {
		t.Fatalf("second leader plans with %+v at revision %d, want the stored spec (revision %d on, 7s)", got.Spec.Policy, got.Metadata.Revision, rev)
	}
}

func withLearnerStart(d time.Duration) func(*Config) {
	return func(c *Config) {
		c.Policy = membership.DefaultPolicy
		c.Policy.LearnerStartTimeout = d
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestTheLeaderUsesTheObjectsHealthTimeout: spec.policy.healthTimeout, not
// the candidate's coordinator.healthTimeout, bounds the leader's calls to
// each member once the object says it, and a change reaches it.
func TestTheLeaderUsesTheObjectsHealthTimeout(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	st, err := store.New(etcdtest.NewClient(t, cl.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	ec := api.NewEtcdCluster()
	ec.Spec.Policy.HealthTimeout = api.Duration(700 * time.Millisecond)
	if err := st.CreateObject(t.Context(), ec); err != nil {
		t.Fatal(err)
	}
	cd := startCandidate(t, cl, "a", 60*time.Second) // coordinator.healthTimeout 1s
	defer cd.stop(t)
	wantTimeout := func(d time.Duration) {
		t.Helper()
		testwait.For(t, 20*time.Second, "the leader's health timeout "+d.String(), func() (bool, string) {
			got := cd.c.admin.HealthTimeout()
			return got == d, "health timeout " + got.String()
		})
	}
	// setHealthTimeout changes the spec as nicoctl apply does: read,
	// change, compare-and-swap, again when the leader's status write came
	// in between.
	setHealthTimeout := func(d time.Duration) {
		t.Helper()
		for {
			cur := &api.EtcdCluster{}
			if err := st.Get(t.Context(), store.EtcdClusterKey, cur); err != nil {
				t.Fatal(err)
			}
			cur.Spec.Policy.HealthTimeout = api.Duration(d)
			err := st.UpdateObject(t.Context(), cur)
			if errors.Is(err, store.ErrConflict) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	wantTimeout(700 * time.Millisecond)
	setHealthTimeout(1500 * time.Millisecond)
	wantTimeout(1500 * time.Millisecond)
	// Unset again: the candidate's own setting.
	setHealthTimeout(0)
	wantTimeout(time.Second)
	cd.c.admin.SetHealthTimeout(0)
	if got := cd.c.admin.HealthTimeout(); got <= 0 {
		t.Fatalf("SetHealthTimeout(0) left %s", got)
	}
}
