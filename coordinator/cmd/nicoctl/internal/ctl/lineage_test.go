package ctl

import (
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
)

// TestSnapshotsOfEarlierIncarnations: a restore changes the etcd cluster
// ID; the snapshots of the clusters the fleet ran before (two restores
// back) still verify and restore, the restore recording them in the
// ClusterLineage; another fleet's snapshot is still refused, exit 3,
// nothing recorded.
func TestSnapshotsOfEarlierIncarnations(t *testing.T) {
	ctx := testCtx(t)
	stDir := t.TempDir()
	c, st := snapshotFleet(t, stDir)
	m := c.Members[0]
	registerNode(t, st, m.Name, m)
	eps := c.Endpoints()
	run(t, eps, "snapshot", "save").want(t, ExitOK, nil, nil)
	first := listed(t, "--from", stDir)[0]
	other := etcdtest.Start(t, 1)
	run(t, other.Endpoints(), "snapshot", "save", "--to", stDir).want(t, ExitOK, nil, nil)
	var foreign string
	for _, r := range listed(t, "--from", stDir) {
		if r.Name != first.Name {
			foreign = r.Name
		}
	}
	fleet := writeFleetFile(t, t.TempDir(), m)

	// Restore 1: cluster A (first) becomes B.
	m.Close()
	run(t, nil, "restore", "--from", first.Name, "--store", stDir, "--fleet", fleet, "--timeout", "1s").want(t, ExitOK, []string{"done in"}, nil)
	_, stop := serveAgain(t, m)
	stB := newStore(t, c)
	run(t, eps, "snapshot", "verify", first.Name).want(t, ExitOK, []string{"restored into a throwaway member", "recorded"}, nil)
	lin := &api.ClusterLineage{}
	if err := stB.Get(ctx, store.ClusterLineageKey, lin); err != nil || !lin.Has(first.ClusterID) {
		t.Fatalf("lineage after the restore: %+v %v, want cluster %s in it", lin.Status, err, first.ClusterID)
	}
	before := drill(t, stB).Metadata.Revision
	run(t, eps, "snapshot", "verify", foreign).want(t, ExitRefused, nil, []string{"refused", "from another cluster", "ran before as"})
	if rev := drill(t, stB).Metadata.Revision; rev != before {
		t.Fatalf("a refused drill was recorded (revision %d -> %d)", before, rev)
	}

	// Restore 2: a snapshot of B; the lineage carries A across.
	run(t, eps, "snapshot", "save").want(t, ExitOK, nil, nil)
	second := listed(t, "--from", stDir)[0]
	stop()
	run(t, nil, "restore", "--from", second.Name, "--store", stDir, "--fleet", fleet, "--timeout", "1s").want(t, ExitOK, []string{"done in"}, nil)
	servedAgain(t, m)
	stC := newStore(t, c)
	for _, name := range []string{first.Name, second.Name} {
		run(t, eps, "snapshot", "verify", name).want(t, ExitOK, []string{"recorded"}, nil)
	}
	before = drill(t, stC).Metadata.Revision
	run(t, eps, "snapshot", "verify", foreign).want(t, ExitRefused, nil, []string{"refused", "from another cluster"})
	if rev := drill(t, stC).Metadata.Revision; rev != before {
		t.Fatalf("a refused drill was recorded (revision %d -> %d)", before, rev)
	}
	// restore, the cluster answering: the other fleet's snapshot is
	// refused; A's, the cluster being itself restored, only with --again
	// (it would discard what the cluster acknowledged since), then passes
	// its checks and waits for the member to be stopped.
	run(t, eps, "restore", "--from", foreign, "--fleet", fleet).want(t, ExitRefused, nil, []string{"another fleet"})
	run(t, eps, "restore", "--from", first.Name, "--fleet", fleet).want(t, ExitRefused, nil, []string{"was restored already", "revisions", "--again"})
	run(t, eps, "restore", "--from", first.Name, "--fleet", fleet, "--again").want(t, ExitRefused, []string{"verified"}, []string{"still serves"})
	run(t, eps, "restore", "--abort", "--fleet", fleet).want(t, ExitOK, []string{"aborted"}, nil)
}
