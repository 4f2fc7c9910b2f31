package ctl

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/store"
)

// TestSnapshotVerifyWithAuthOn: nico's fleets run etcd with authentication
// on, and a snapshot keeps it. snapshot verify drills such a snapshot by
// name (its cluster ID checked against the cluster's), with --from, as a
// file, and after a restore (the snapshot's cluster then one of the
// lineage's); each drill is recorded ok. A corrupted snapshot exits
// non-zero and records no drill.
func TestSnapshotVerifyWithAuthOn(t *testing.T) {
	ctx := testCtx(t)
	stDir := t.TempDir()
	c, st := snapshotFleet(t, stDir)
	m := c.Members[0]
	registerNode(t, st, m.Name, m)
	if err := rbac.EnableAuth(ctx, st.Client().Auth, store.DefaultPrefix, nil, logging.Test(t)); err != nil {
		t.Fatal(err)
	}
	eps := c.Endpoints()
	run(t, eps, "snapshot", "save").want(t, ExitOK, nil, nil)
	first := listed(t, "--from", stDir)[0]
	want := fmt.Sprintf("%d keys at revision %d", first.TotalKeys, first.Revision)

	run(t, eps, "snapshot", "verify", first.Name).want(t, ExitOK, []string{want, "recorded"}, nil)
	if d := drill(t, st); !d.Status.OK || d.Status.Name != first.Name {
		t.Fatalf("drill report %+v, want an ok drill of %s", d.Status, first.Name)
	}
	run(t, nil, "snapshot", "verify", "--from", stDir, first.Name).want(t, ExitOK, []string{want}, nil)
	path := filepath.Join(stDir, first.Name+".db")
	run(t, nil, "snapshot", "verify", path).want(t, ExitOK, []string{want}, nil)

	// After a restore the cluster ID is new: the first snapshot's cluster
	// is accepted as one of the lineage's, and the restored cluster's own
	// snapshots (auth still on) verify too.
	fleet := writeFleetFile(t, t.TempDir(), m)
	m.Close()
	run(t, nil, "restore", "--from", first.Name, "--store", stDir, "--fleet", fleet, "--timeout", "1s").want(t, ExitOK, []string{"done in"}, nil)
	servedAgain(t, m)
	stB := newStore(t, c)
	lin := &api.ClusterLineage{}
	if err := stB.Get(ctx, store.ClusterLineageKey, lin); err != nil || !lin.Has(first.ClusterID) {
		t.Fatalf("lineage after the restore: %+v %v, want cluster %s in it", lin.Status, err, first.ClusterID)
	}
	run(t, eps, "snapshot", "verify", first.Name).want(t, ExitOK, []string{want, "recorded"}, nil)
	if d := drill(t, stB); !d.Status.OK || d.Status.Name != first.Name {
		t.Fatalf("drill report after the restore %+v, want an ok drill of %s", d.Status, first.Name)
	}
	run(t, eps, "snapshot", "save").want(t, ExitOK, nil, nil)
	second := listed(t, "--from", stDir)[0]
	if second.Name == first.Name || second.ClusterID == first.ClusterID {
		t.Fatalf("newest snapshot %+v, want one of the restored cluster", second)
	}
	run(t, eps, "snapshot", "verify", second.Name).want(t, ExitOK, []string{"recorded"}, nil)

	// A corrupted snapshot: non-zero, nothing recorded.
	before := drill(t, stB).Metadata.Revision
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, eps, "snapshot", "verify", first.Name).want(t, ExitRefused, nil, []string{"refused"})
	run(t, nil, "snapshot", "verify", path).want(t, ExitRefused, nil, []string{"refused"})
	if rev := drill(t, stB).Metadata.Revision; rev != before {
		t.Fatalf("a refused drill was recorded (revision %d -> %d)", before, rev)
	}
}
