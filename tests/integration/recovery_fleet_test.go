package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/snapshot"
	"go.uber.org/zap"
)

// recoveryVoters are the three voters the restore and recover tests start
// from.
var recoveryVoters = []string{"cp-1", "cp-2", "cp-3"}

// appKeys is how many keys putAppKeys writes.
const appKeys = 20

// growRecoveryVoters makes the fleet of the restore and recover tests:
// cp-1 bootstrapped, spec.voters 3, the candidate c-1, then cp-2 and cp-3,
// until the three are voters. edit, when set, adjusts each agent's config
// (i: its place in recoveryVoters) just before the agent starts. It
// returns the three names.
func (f *fleet) growRecoveryVoters(edit func(i int, cfg *agent.Config)) []string {
	f.t.Helper()
	for i, n := range recoveryVoters {
		cfg := f.AgentConfig(n, i == 0)
		if edit != nil {
			edit(i, &cfg)
		}
		f.Start(cfg)
		if i == 0 {
			f.WaitVoters(30*time.Second, n)
			f.SetVoters(3)
			f.StartCoordinator("c-1")
		}
	}
	f.WaitVoters(90*time.Second, recoveryVoters...)
	return slices.Clone(recoveryVoters)
}

// putAppKeys writes /app/k00 ... /app/k19, each holding its number.
func (f *fleet) putAppKeys(ctx context.Context, cli *clientv3.Client) {
	f.t.Helper()
	for i := range appKeys {
		if _, err := cli.Put(ctx, fmt.Sprintf("/app/k%02d", i), fmt.Sprint(i)); err != nil {
			f.t.Fatal(err)
		}
	}
}

// checkAppKeys fails the test unless every key of putAppKeys holds its
// number; what says which writes they are.
func (f *fleet) checkAppKeys(ctx context.Context, cli *clientv3.Client, what string) {
	f.t.Helper()
	for i := range appKeys {
		resp, err := cli.Get(ctx, fmt.Sprintf("/app/k%02d", i))
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != fmt.Sprint(i) {
			f.t.Fatalf("write /app/k%02d %s: %v %v", i, what, resp, err)
		}
	}
}

// snapshotAppKeys saves a snapshot of a voter's member after putAppKeys,
// then writes /app/after, which a restore of it must not bring back. It
// returns the snapshot's file and a read of /app/k00 taken before it (its
// header names the old cluster).
func (f *fleet) snapshotAppKeys(ctx context.Context, cli *clientv3.Client) (string, *clientv3.GetResponse) {
	f.t.Helper()
	before, err := cli.Get(ctx, "/app/k00")
	if err != nil {
		f.t.Fatal(err)
	}
	// The snapshot is of a voter's member (a standby's client URL, which
	// serves nothing, may sort first among the fleet's endpoints).
	ml, err := cli.MemberList(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	var voters []string
	for _, m := range ml.Members {
		if !m.IsLearner && len(m.ClientURLs) > 0 {
			voters = append(voters, m.ClientURLs[0])
		}
	}
	if len(voters) == 0 {
		f.t.Fatalf("no voter serves clients: %v", ml.Members)
	}
	slices.Sort(voters)
	// A snapshot is of what its member applied: a linearizable read
	// through that member first makes it hold every write above.
	if _, err := etcdtest.NewClient(f.t, voters[0]).Get(ctx, "/app/k19"); err != nil {
		f.t.Fatal(err)
	}
	snap := filepath.Join(f.TempDir(), "snap.db")
	rootTLS := etcdtest.ClientTLS(f.t, pki.RootIdentity)
	if _, err := snapshot.SaveWithVersion(ctx, zap.NewNop(), clientv3.Config{Endpoints: voters[:1], TLS: rootTLS, DialTimeout: 5 * time.Second}, snap); err != nil {
		f.t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/app/after", "lost by design"); err != nil {
		f.t.Fatal(err)
	}
	return snap, before
}

// checkRestored fails the test unless the fleet serves the keys of
// putAppKeys and not /app/after; it returns the read of /app/after (its
// header names the cluster that serves).
func (f *fleet) checkRestored(ctx context.Context) *clientv3.GetResponse {
	f.t.Helper()
	cli := f.Client()
	f.checkAppKeys(ctx, cli, "before the snapshot")
	after, err := cli.Get(ctx, "/app/after")
	if err != nil || len(after.Kvs) != 0 {
		f.t.Fatalf("a write after the snapshot survived: %v %v", after, err)
	}
	return after
}

// waitOpSucceeded waits until the operation id is journaled as succeeded
// in the store and no operation holds the slot.
func (f *fleet) waitOpSucceeded(ctx context.Context, id string) {
	f.t.Helper()
	st := f.Store()
	testwait.For(f.t, 30*time.Second, "the restore journaled as succeeded and the slot free", func() (bool, string) {
		op := &api.Operation{}
		if err := st.Get(ctx, store.OpKey(id), op); err != nil {
			return false, err.Error()
		}
		act, err := st.ActiveOp(ctx)
		return op.Status.Phase == api.OpSucceeded && act == nil && err == nil, fmt.Sprintf("phase %s, active %v %v", op.Status.Phase, act, err)
	})
}

// joinAnother starts cp-4 and waits until it joined as a voter or a
// standby: the coordinator still serves joins.
func (f *fleet) joinAnother() {
	f.t.Helper()
	f.Start(f.AgentConfig("cp-4", false))
	testwait.For(f.t, 90*time.Second, "cp-4 joined as a voter or standby", func() (bool, string) {
		err := f.CheckVoterOrStandby("cp-4", f.Node("cp-4").Cfg.PeerURL)
		return err == nil, fmt.Sprint(err)
	})
}

// loseForGood stops the coordinator c-1, then for cp-2 and cp-3 calls
// before (when set), stops the agent and removes its data dir: two of the
// three voters are gone.
func (f *fleet) loseForGood(before func(name string)) {
	f.t.Helper()
	f.Coord("c-1").Stop()
	for _, n := range recoveryVoters[1:] {
		if before != nil {
			before(n)
		}
		if err := f.Node(n).Stop(); err != nil {
			f.t.Logf("stop %s: %v", n, err)
		}
		if err := os.RemoveAll(f.Node(n).Cfg.DataDir); err != nil {
			f.t.Fatal(err)
		}
	}
}

// regrowRecovered checks that cp-1, recovered alone, serves every write of
// putAppKeys, then starts the candidate c-2 and two new machines, cp-4 and
// cp-5, and waits until they join cp-1 as voters.
func (f *fleet) regrowRecovered(ctx context.Context) {
	f.t.Helper()
	f.WaitVoters(60*time.Second, "cp-1")
	f.checkAppKeys(ctx, f.Client(), "applied before the loss")
	f.StartCoordinator("c-2")
	for _, n := range []string{"cp-4", "cp-5"} {
		f.Start(f.AgentConfig(n, false))
	}
	f.WaitVoters(120*time.Second, "cp-1", "cp-4", "cp-5")
}
