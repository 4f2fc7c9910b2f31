package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/snapshot"
	"github.com/homystack/nico/pkg/snapshot/snapshottest"
)

// takeFrom writes n keys to a fresh one-member cluster and takes a
// snapshot of it into t.TempDir().
func takeFrom(t *testing.T, n int) (*etcdtest.Cluster, *snapshot.Taken) {
	t.Helper()
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	ctx := context.Background()
	for i := range n {
		if _, err := cli.Put(ctx, fmt.Sprintf("/k/%03d", i), "v"); err != nil {
			t.Fatalf("put: %v", err)
		}
	}
	var seen int64
	tk, err := snapshot.Take(ctx, cli, snapshot.TakeOptions{Dir: t.TempDir(), Reason: snapshot.ReasonOnDemand, Progress: func(n int64) { seen = n }})
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	if seen != tk.Meta.Size {
		t.Fatalf("progress reported %d bytes, the snapshot is %d", seen, tk.Meta.Size)
	}
	return c, tk
}

func TestTakeChecksLikeEtcdutlStatus(t *testing.T) {
	c, tk := takeFrom(t, 20)
	cli := c.Client(t)
	st, err := cli.Status(context.Background(), c.Members[0].ClientURL)
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	m := tk.Meta
	if m.ClusterID != api.MemberID(st.Header.ClusterId) || m.MemberID != api.MemberID(st.Header.MemberId) {
		t.Fatalf("meta names cluster %s member %s, the member says %x %x", m.ClusterID, m.MemberID, st.Header.ClusterId, st.Header.MemberId)
	}
	if m.Revision != st.Header.Revision || m.TotalKeys != 20 {
		t.Fatalf("Check read revision %d and %d keys, want %d and 20", m.Revision, m.TotalKeys, st.Header.Revision)
	}
	if fi, _ := os.Stat(tk.Path); fi.Size() != m.Size || m.Size%512 != 32 || len(m.SHA256) != 64 {
		t.Fatalf("meta size %d sha %q, file %d bytes", m.Size, m.SHA256, fi.Size())
	}
	if m.EtcdVersion == "" || m.Hash == 0 {
		t.Fatalf("meta lacks the etcd version or hash: %+v", m)
	}
}

func TestTruncatedSnapshotRefused(t *testing.T) {
	_, tk := takeFrom(t, 5)
	b, err := os.ReadFile(tk.Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{1, 32, 4096} {
		p := filepath.Join(t.TempDir(), "cut.db")
		if err := os.WriteFile(p, b[:len(b)-cut], 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := snapshot.Check(p); !errors.Is(err, snapshot.ErrCorrupt) {
			t.Fatalf("Check of a snapshot cut by %d bytes: %v, want ErrCorrupt", cut, err)
		}
		if _, err := snapshot.Verify(context.Background(), p, snapshot.VerifyOptions{Dir: t.TempDir()}); !errors.Is(err, snapshot.ErrCorrupt) {
			t.Fatalf("Verify of a snapshot cut by %d bytes: %v, want ErrCorrupt", cut, err)
		}
	}
	// One flipped byte inside the database: the sha256 no longer matches.
	b[1000] ^= 0xff
	p := filepath.Join(t.TempDir(), "flipped.db")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Check(p); !errors.Is(err, snapshot.ErrCorrupt) {
		t.Fatalf("Check of an altered snapshot: %v, want ErrCorrupt", err)
	}
}

func TestVerifyRestoresIntoAThrowawayMember(t *testing.T) {
	_, tk := takeFrom(t, 30)
	dir := t.TempDir()
	res, err := snapshot.Verify(context.Background(), tk.Path, snapshot.VerifyOptions{Dir: dir, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if res.Keys != 30 || res.Revision != tk.Meta.Revision {
		t.Fatalf("Verify served %d keys at revision %d, want 30 at %d", res.Keys, res.Revision, tk.Meta.Revision)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("Verify left %d entries in its dir", len(ents))
	}
}

func TestVerifyStoredRefusesAnotherCluster(t *testing.T) {
	_, tk := takeFrom(t, 3)
	st := snapshottest.NewMem()
	f, err := os.Open(tk.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := st.Put(context.Background(), tk.Meta, f); err != nil {
		t.Fatal(err)
	}
	other := tk.Meta.ClusterID + 1
	_, _, err = snapshot.VerifyStored(context.Background(), st, tk.Meta.Name, snapshot.VerifyOptions{Dir: t.TempDir(), ExpectCluster: other})
	if !errors.Is(err, snapshot.ErrOtherCluster) {
		t.Fatalf("VerifyStored against cluster %s: %v, want ErrOtherCluster", other, err)
	}
	m, res, err := snapshot.VerifyStored(context.Background(), st, tk.Meta.Name, snapshot.VerifyOptions{Dir: t.TempDir(), ExpectCluster: tk.Meta.ClusterID})
	if err != nil || res.Keys != 3 || m.Name != tk.Meta.Name {
		t.Fatalf("VerifyStored of its own cluster: %+v, %v", res, err)
	}
}

// TestTakeFromAMemberWithoutQuorum: a member whose cluster lost quorum
// cannot be brought up to the cluster's acknowledged writes; it is
// snapshotted as it is (the snapshot a disaster recovery starts from),
// and the Meta says so.
func TestTakeFromAMemberWithoutQuorum(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx := context.Background()
	if _, err := c.Client(t).Put(ctx, "/a", "1"); err != nil {
		t.Fatal(err)
	}
	c.Members[1].Close()
	c.Members[2].Close()
	cli := etcdtest.NewClient(t, c.Members[0].ClientURL)
	tk, err := snapshot.Take(ctx, cli, snapshot.TakeOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("Take from the last member: %v", err)
	}
	if !strings.Contains(tk.Meta.Unsynced, "linearizable read") {
		t.Fatalf("Meta.Unsynced = %q, want why the member could not be synced", tk.Meta.Unsynced)
	}
	if tk.Meta.TotalKeys != 1 {
		t.Fatalf("the member's own state has %d keys, want 1", tk.Meta.TotalKeys)
	}
}
