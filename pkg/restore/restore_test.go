package restore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// restoreAndCheck is the shared body: n voters with data, a snapshot,
// writes after it, a restore onto the first member; then every write up to
// the snapshot is there, none after it, the cluster ID is new, the
// revision bumped, a watch from an old revision is told it is compacted,
// and all n are voters again.
func restoreAndCheck(t *testing.T, n int, bin string, killAt Step) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := startFleet(t, n, bin)
	cli := f.client()
	f.seed(ctx, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	for i := range 100 {
		if _, err := cli.Put(ctx, fmt.Sprintf("k%03d", i), fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Put(ctx, prefix+"election/694d7a1b2c3d", "cp-1"); err != nil { // a coordinator's campaign
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, prefix+"joins/cp-4", "{}"); err != nil {
		t.Fatal(err)
	}
	old, err := cli.Get(ctx, "k000")
	if err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), "snap.db")
	f.save(ctx, snap)
	if _, err := cli.Put(ctx, "after-snapshot", "lost by design"); err != nil {
		t.Fatal(err)
	}
	info, err := Verify(snap, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckFleet(info, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), true, "cp-1"); err != nil {
		t.Fatal(err)
	}
	const bump = 1_000_000
	j := &Journal{ID: "restore-1", Kind: KindRestore, Target: "cp-1", Others: f.others("cp-1"), Snapshot: info, BumpRevision: bump, Step: StepStop, StartedAt: time.Now()}
	if err := ReserveSlot(ctx, f.client(), prefix, j); err != nil {
		t.Fatal(err)
	}
	jf := FileJournal{Path: filepath.Join(t.TempDir(), "journal.json")}
	errKilled := errors.New("killed")
	r := &Runner{Fleet: f, Journal: jf, Prefix: prefix, AfterStep: func(s Step) error {
		if s == killAt {
			return errKilled
		}
		return nil
	}}
	err = r.Run(ctx, j)
	if killAt != "" {
		if !errors.Is(err, errKilled) {
			t.Fatalf("run to the kill at %s: %v", killAt, err)
		}
		// The process dies: its members with it. A new one resumes
		// from the journal file alone.
		for _, m := range f.Members {
			_ = m.Runtime.Stop(ctx)
			m.Runtime = newRuntime(bin)
		}
		loaded, ok, lerr := jf.Load()
		if lerr != nil || !ok {
			t.Fatalf("journal after the kill: %v %v", ok, lerr)
		}
		j = loaded
		r.AfterStep = nil
		err = r.Run(ctx, j)
	}
	if err != nil {
		t.Fatal(err)
	}
	ncli := f.client()
	for i := range 100 {
		resp, err := ncli.Get(ctx, fmt.Sprintf("k%03d", i))
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != fmt.Sprint(i) {
			t.Fatalf("acknowledged write k%03d before the snapshot: %v %v", i, resp, err)
		}
	}
	if resp, _ := ncli.Get(ctx, "after-snapshot"); resp == nil || len(resp.Kvs) != 0 {
		t.Fatalf("a write after the snapshot survived the restore: %v", resp)
	}
	list, err := ncli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if list.Header.ClusterId == old.Header.ClusterId || list.Header.ClusterId != j.NewClusterID {
		t.Fatalf("cluster ID %x after restore, old %x, journaled %x: want a new one", list.Header.ClusterId, old.Header.ClusterId, j.NewClusterID)
	}
	if len(list.Members) != n {
		t.Fatalf("%d members after restore, want %d: %v", len(list.Members), n, list.Members)
	}
	for _, m := range list.Members {
		if m.IsLearner {
			t.Fatalf("member %s still a learner", m.Name)
		}
	}
	now, err := ncli.Get(ctx, "k000")
	if err != nil {
		t.Fatal(err)
	}
	if rev := now.Header.Revision; rev < info.Revision+bump {
		t.Fatalf("revision %d after restore, want at least %d (snapshot %d + bump %d)", rev, info.Revision+bump, info.Revision, bump)
	}
	w := ncli.Watch(ctx, "k000", clientv3.WithRev(old.Header.Revision))
	if wr := <-w; wr.CompactRevision == 0 {
		t.Fatalf("a watch from the old revision %d was not told it is compacted: %+v", old.Header.Revision, wr)
	}
	for _, dir := range []string{"election/", "joins/"} {
		if resp, _ := ncli.Get(ctx, prefix+dir, clientv3.WithPrefix()); resp == nil || len(resp.Kvs) != 0 {
			t.Fatalf("the snapshot's %s keys survived the restore: %v", dir, resp)
		}
	}
	if act, _ := ncli.Get(ctx, prefix+"active-op"); len(act.Kvs) != 0 {
		t.Fatalf("the slot is still held after the restore: %s", act.Kvs[0].Value)
	}
}

func TestRestoreSingleVoter(t *testing.T) { restoreAndCheck(t, 1, "", "") }

func TestRestoreThreeVoters(t *testing.T) { restoreAndCheck(t, 3, "", "") }

// TestRestoreResumesAfterAKill: the process running the restore dies
// (its members with it) after the restore step and after the first
// rejoin; a new one resumes from the journal file and finishes.
func TestRestoreResumesAfterAKill(t *testing.T) {
	t.Parallel()
	for _, at := range []Step{StepRestore, StepRejoin} {
		t.Run(string(at), func(t *testing.T) { restoreAndCheck(t, 3, "", at) })
	}
}

// TestRestoreWithEtcdBinaries restores members run as etcd binaries
// (NICO_ETCD_BINARIES) with etcdutl's library of the go.mod version.
func TestRestoreWithEtcdBinaries(t *testing.T) {
	t.Parallel()
	for _, b := range etcdtest.Binaries(t) {
		t.Run(b.Version, func(t *testing.T) { restoreAndCheck(t, 2, b.Path, StepStart) })
	}
}
