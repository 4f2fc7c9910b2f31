package ctl

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
)

// snapshotFleet is a one-member cluster with keys and an EtcdCluster whose
// spec.snapshots.destination is a directory.
func snapshotFleet(t *testing.T, dir string) (*etcdtest.Cluster, *store.Store) {
	t.Helper()
	c := etcdtest.Start(t, 1)
	st := newStore(t, c)
	ctx := testCtx(t)
	for i := range 12 {
		if _, err := st.Client().Put(ctx, fmt.Sprintf("/app/%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	ec := api.NewEtcdCluster()
	ec.Spec.Voters = 1
	ec.Spec.Snapshots = api.EtcdSnapshotsSpec{Destination: dir}
	if err := st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	return c, st
}

// listed runs snapshot list -o json and returns the rows.
func listed(t *testing.T, args ...string) []snapshotRow {
	t.Helper()
	r := run(t, nil, append([]string{"-o", "json", "snapshot", "list"}, args...)...)
	r.want(t, ExitOK, nil, nil)
	var rows []snapshotRow
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("list -o json: %v\n%s", err, r.stdout)
	}
	return rows
}

func drill(t *testing.T, st *store.Store) *api.SnapshotDrill {
	t.Helper()
	d := &api.SnapshotDrill{}
	if err := st.Get(testCtx(t), store.SnapshotDrillKey, d); err != nil {
		t.Fatalf("drill report: %v", err)
	}
	return d
}

func TestSnapshotSaveListVerify(t *testing.T) {
	dir := t.TempDir()
	c, st := snapshotFleet(t, dir)
	eps := c.Endpoints()

	run(t, eps, "snapshot", "save").want(t, ExitOK, []string{"stored in " + dir, "revision", "keys"}, []string{"taking a snapshot from m0"})
	rows := listed(t, "--from", dir)
	if len(rows) != 1 || rows[0].Where != dir || rows[0].TotalKeys < 13 || rows[0].Reason != "on-demand" {
		t.Fatalf("list = %+v; want the one on-demand snapshot in %s", rows, dir)
	}
	name := rows[0].Name
	run(t, eps, "snapshot", "list").want(t, ExitOK, []string{"NAME", "AGE", "SIZE", "REVISION", "WHERE", name, dir}, nil)

	want := fmt.Sprintf("%d keys at revision %d", rows[0].TotalKeys, rows[0].Revision)
	run(t, eps, "snapshot", "verify", name).want(t, ExitOK, []string{"restored into a throwaway member", want, "recorded"}, nil)
	d := drill(t, st)
	if !d.Status.OK || d.Status.Name != name || d.Status.Keys != int64(rows[0].TotalKeys) || d.Status.Revision != rows[0].Revision {
		t.Fatalf("drill report %+v, want an ok drill of %s", d.Status, name)
	}
	// A local file, no cluster needed.
	run(t, nil, "snapshot", "verify", filepath.Join(dir, name+".db")).want(t, ExitOK, []string{want}, nil)
}

// TestSnapshotVerifyRefusesBadInput: a truncated snapshot and one of
// another cluster are refused with the reason; no drill is recorded.
func TestSnapshotVerifyRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	c, st := snapshotFleet(t, dir)
	eps := c.Endpoints()
	run(t, eps, "snapshot", "save").want(t, ExitOK, nil, nil)
	good := listed(t, "--from", dir)[0].Name
	run(t, eps, "snapshot", "verify", good).want(t, ExitOK, nil, nil)
	before := drill(t, st).Metadata.Revision

	// Another cluster's snapshot in the same store.
	other := etcdtest.Start(t, 1)
	run(t, other.Endpoints(), "snapshot", "save", "--to", dir).want(t, ExitOK, nil, nil)
	var foreign string
	for _, r := range listed(t, "--from", dir) {
		if r.Name != good {
			foreign = r.Name
		}
	}
	run(t, eps, "snapshot", "verify", foreign).want(t, ExitRefused, nil, []string{"refused", "from another cluster", "this cluster is", "--any-cluster"})
	if rev := drill(t, st).Metadata.Revision; rev != before {
		t.Fatalf("a refused drill was recorded (revision %d -> %d)", before, rev)
	}
	run(t, eps, "snapshot", "verify", "--any-cluster", foreign).want(t, ExitOK, []string{"restored"}, nil)
	before = drill(t, st).Metadata.Revision

	// A truncated snapshot, in the store and as a file.
	path := filepath.Join(dir, good+".db")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, eps, "snapshot", "verify", good).want(t, ExitRefused, nil, []string{"refused", "truncated"})
	run(t, nil, "snapshot", "verify", path).want(t, ExitRefused, nil, []string{"refused", "truncated"})
	if rev := drill(t, st).Metadata.Revision; rev != before {
		t.Fatalf("a refused drill was recorded (revision %d -> %d)", before, rev)
	}
	r := run(t, eps, "snapshot", "verify", "no-such-snapshot")
	r.want(t, ExitNotFound, nil, []string{"not found"})
	if !strings.Contains(r.stderr, dir) {
		t.Errorf("not found does not say where it looked: %s", r.stderr)
	}
}

func TestSnapshotWithoutDestination(t *testing.T) {
	c := etcdtest.Start(t, 1)
	run(t, c.Endpoints(), "snapshot", "save").want(t, ExitUsage, nil, []string{"no spec.snapshots.destination", "--to"})
	run(t, nil, "snapshot", "list", "--from", "relative/dir").want(t, ExitUsage, nil, []string{"--from", "not an absolute path"})
}
