package agent

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/sdnotify"
	"github.com/homystack/nico/pkg/store"
)

// TestDataDirReportedWhenItMatters: the data-dir controller writes the
// node's status on the first measurement, not for a small move, when the
// data dir turns full and when it has space again.
func TestDataDirReportedWhenItMatters(t *testing.T) {
	const mib = 1 << 20
	cl := etcdtest.Start(t, 1)
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	peer, client := etcdtest.URLs(t)
	a := New(Config{Name: "cp-3", Roles: []api.Role{api.RoleControlPlane}, PeerURL: peer, ClientURL: client, DataDir: t.TempDir()}, nil, sdnotify.New(), logging.Test(t))
	a.use(st.Client(), st)
	n := api.NewNode("cp-3")
	n.Status.Phase = api.NodeMember
	a.rec.adopt(n)
	free := int64(200 * mib)
	d := a.dataDirSpace()
	d.space = func(string) (int64, int64, error) { return free, 256 * mib, nil }
	step := func(what string, f int64, want *api.DataDirStatus) {
		t.Helper()
		free = f
		before := &api.Node{}
		_ = st.Get(t.Context(), store.NodeKey("cp-3"), before)
		if err := d.measure(t.Context()); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got := &api.Node{}
		if err := st.Get(t.Context(), store.NodeKey("cp-3"), got); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if want == nil {
			if got.Metadata.Revision != before.Metadata.Revision {
				t.Fatalf("%s: the node was written: %+v", what, got.Status.DataDir)
			}
			return
		}
		d := got.Status.DataDir
		if d == nil || d.FreeBytes != want.FreeBytes || d.SizeBytes != want.SizeBytes || d.Full != want.Full || got.Status.Phase != api.NodeMember {
			t.Fatalf("%s: %+v (phase %s), want %+v", what, d, got.Status.Phase, want)
		}
	}
	step("first measurement", 200*mib, &api.DataDirStatus{FreeBytes: 200 * mib, SizeBytes: 256 * mib})
	step("a small move", 190*mib, nil)
	step("full", 10*mib, &api.DataDirStatus{FreeBytes: 10 * mib, SizeBytes: 256 * mib, Full: true})
	step("still full", 0, nil)
	step("space again", 150*mib, &api.DataDirStatus{FreeBytes: 150 * mib, SizeBytes: 256 * mib})
}

// TestFsSpace: the free and total bytes statfs gives for a directory, and
// for a data dir not made yet those of its nearest parent.
func TestFsSpace(t *testing.T) {
	dir := t.TempDir()
	var want syscall.Statfs_t
	if err := syscall.Statfs(dir, &want); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "not", "made", "etcd")} {
		free, size, err := fsSpace(p)
		if err != nil || size != int64(want.Blocks)*int64(want.Bsize) || free <= 0 || free > size {
			t.Errorf("fsSpace(%s) = %d, %d, %v; size want %d", p, free, size, err, int64(want.Blocks)*int64(want.Bsize))
		}
	}
}
