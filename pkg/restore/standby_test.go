package restore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestRestoreWithAStandby: with a control-plane host that is not a member
// (a standby) among the members named, a restore rejoins only the voters
// and leaves the standby as it is; a learner in the live cluster (a
// membership change in flight) is refused before anything changes. From
// the restored member's first start to the restore's end the restored
// cluster is held (store.Hold), and released with its ID recorded. A
// second restore of the restored cluster is refused unless Again, naming
// the revisions it would discard.
func TestRestoreWithAStandby(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := startFleet(t, 3, "")
	f.seed(ctx, fleetTime)
	cli := f.client()
	first, err := cli.Get(ctx, "health")
	if err != nil {
		t.Fatal(err)
	}
	// The record a leader keeps of its cluster.
	if _, err := cli.Put(ctx, prefix+store.ClusterIDKey, store.FormatClusterID(first.Header.ClusterId)); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), "snap.db")
	f.save(ctx, snap)
	members := []string{"cp-1", "cp-2", "cp-3", "cp-4"} // cp-4: a standby

	// A membership change in flight: refused, nothing held.
	var add *clientv3.MemberAddResponse
	testwait.For(t, time.Minute, "a learner added", func() (bool, string) {
		add, err = cli.MemberAddAsLearner(ctx, []string{"http://127.0.0.1:1"})
		return err == nil, fmt.Sprint(err) // etcd refuses while a peer is not connected yet
	})
	_, err = Prepare(ctx, Request{Snapshot: snap, Target: "cp-1", Members: members, Live: f.client(), Prefix: prefix, Now: time.Now()})
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "learner") {
		t.Fatalf("restore with a learner in the live cluster: %v, want refused naming the membership change", err)
	}
	if act, _ := cli.Get(ctx, prefix+store.ActiveOpKey); len(act.Kvs) != 0 {
		t.Fatalf("a refused restore holds the slot: %s", act.Kvs[0].Value)
	}
	if _, err := cli.MemberRemove(ctx, add.Member.ID); err != nil {
		t.Fatal(err)
	}

	j, err := Prepare(ctx, Request{Snapshot: snap, Target: "cp-1", Members: members, Live: f.client(), Prefix: prefix, BumpRevision: 1000, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(j.Others, []string{"cp-2", "cp-3"}) || !slices.Equal(j.Standbys, []string{"cp-4"}) {
		t.Fatalf("journal others %v standbys %v, want the voters cp-2 cp-3 to rejoin and cp-4 left a standby", j.Others, j.Standbys)
	}
	info, err := Verify(snap, prefix)
	if err != nil || !slices.Equal(info.Voters, []string{"cp-1", "cp-2", "cp-3"}) {
		t.Fatalf("the snapshot's voters %v (%v), want cp-1 cp-2 cp-3", info.Voters, err)
	}
	jf := FileJournal{Path: filepath.Join(t.TempDir(), "journal.json")}
	var heldAt []string
	r := &Runner{Fleet: f, Journal: jf, Prefix: prefix, AfterStep: func(s Step) error {
		if stepIndex(s) < stepIndex(StepStart) || s == StepFinish {
			return nil
		}
		why := hold(t, f)
		if why == "" {
			return fmt.Errorf("after step %s the restored cluster is not held", s)
		}
		heldAt = append(heldAt, string(s))
		return nil
	}}
	if err := r.Run(ctx, j); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(heldAt, string(StepStart)) {
		t.Fatalf("held after %v, want from the restored member's first start", heldAt)
	}
	if why := hold(t, f); why != "" {
		t.Fatalf("the restored cluster is still held once the restore is done: %s", why)
	}
	ncli := f.client()
	id, err := ncli.Get(ctx, prefix+store.ClusterIDKey)
	if err != nil || len(id.Kvs) != 1 || string(id.Kvs[0].Value) != store.FormatClusterID(j.NewClusterID) {
		t.Fatalf("cluster ID record after the restore: %v %v, want %x", id, err, j.NewClusterID)
	}
	for i := range 5 {
		if _, err := ncli.Put(ctx, fmt.Sprintf("acked-%d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	_, err = Prepare(ctx, Request{Snapshot: snap, Target: "cp-1", Members: members, Live: f.client(), Prefix: prefix, Now: time.Now()})
	if !errors.Is(err, ErrRestoredAlready) || !strings.Contains(err.Error(), j.ID) || !strings.Contains(err.Error(), "revisions") {
		t.Fatalf("a second restore of the restored cluster: %v, want refused naming %s and the revisions it would discard", err, j.ID)
	}
	again, err := Prepare(ctx, Request{Snapshot: snap, Target: "cp-1", Members: members, Live: f.client(), Prefix: prefix, Now: time.Now().Add(time.Second), Again: true})
	if err != nil {
		t.Fatalf("a second restore with Again: %v", err)
	}
	if err := ReleaseLive(ctx, f.client(), prefix, again, "test"); err != nil {
		t.Fatal(err)
	}
}

// hold reads the hold of the cluster f serves.
func hold(t *testing.T, f *testFleet) string {
	t.Helper()
	cli, err := f.Client(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	st, err := store.New(cli, prefix)
	if err != nil {
		t.Fatal(err)
	}
	why, _, _, err := st.Hold(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return why
}
