package restore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var fleetTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestRestoreBadInput: a truncated or corrupted snapshot, a snapshot of
// another cluster, a target that is not a member and a restore while
// another change holds the slot are each refused with the reason, and
// the live cluster is left as it was (no slot taken, members serving).
func TestRestoreBadInput(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := startFleet(t, 1, "")
	f.seed(ctx, fleetTime)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	f.save(ctx, good)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.db")
	if err := os.WriteFile(truncated, data[:len(data)-100], 0o600); err != nil {
		t.Fatal(err)
	}
	flipped := filepath.Join(dir, "flipped.db")
	bad := append([]byte(nil), data...)
	bad[len(bad)/2] ^= 0xff
	if err := os.WriteFile(flipped, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	// Another fleet: same member names, its own EtcdCluster.
	other := startFleet(t, 1, "")
	other.seed(ctx, fleetTime.Add(time.Hour))
	foreign := filepath.Join(dir, "foreign.db")
	other.save(ctx, foreign)

	live := func() *clientv3.Client { return f.client() }
	cases := []struct {
		name, snap, target string
		busy               bool
		want               error
	}{
		{"truncated", truncated, "cp-1", false, ErrBadSnapshot},
		{"corrupted", flipped, "cp-1", false, ErrBadSnapshot},
		{"missing", filepath.Join(dir, "absent.db"), "cp-1", false, ErrBadSnapshot},
		{"another cluster", foreign, "cp-1", false, ErrBadSnapshot},
		{"target not a member", good, "cp-9", false, ErrNotMember},
		{"another change in flight", good, "cp-1", true, ErrBusy},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.busy {
				if _, err := live().Put(ctx, prefix+store.ActiveOpKey, "join-cp-4"); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _, _ = live().Delete(ctx, prefix+store.ActiveOpKey) })
			}
			before, err := live().Get(ctx, "\x00", clientv3.WithFromKey())
			if err != nil {
				t.Fatal(err)
			}
			_, err = Prepare(ctx, Request{Snapshot: c.snap, Target: c.target, Members: []string{"cp-1", "cp-9"}, Live: live(), Prefix: prefix, Now: time.Now()})
			if !errors.Is(err, c.want) {
				t.Fatalf("Prepare = %v, want %v", err, c.want)
			}
			t.Logf("refused: %v", err)
			after, err := live().Get(ctx, "\x00", clientv3.WithFromKey())
			if err != nil {
				t.Fatal(err)
			}
			if after.Header.Revision != before.Header.Revision {
				t.Fatalf("revision %d -> %d: a refused restore changed the cluster", before.Header.Revision, after.Header.Revision)
			}
			if isDone(f.Members[0].Runtime.Done()) {
				t.Fatal("a refused restore stopped the member")
			}
		})
	}
}
