package etcdadmin

import (
	"fmt"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/testwait"
)

// TestDowngradeEnableAndCancel walks etcd's downgrade API on a real
// (embedded 3.7) cluster: a target that is not the previous minor is
// refused by validate and changes nothing; enabling 3.6 lowers the cluster
// version to 3.6.0 with the downgrade reported in progress; cancelling it
// ends the downgrade and the cluster version returns to 3.7.0.
func TestDowngradeEnableAndCancel(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	a := New(cl.Client(t), etcdtest.CallBudget)
	t.Cleanup(a.Close)
	url := cl.Endpoints()[0]
	state := func() VersionState {
		vs, err := a.VersionState(ctx(t), url)
		if err != nil {
			t.Fatal(err)
		}
		return vs
	}
	// A fresh cluster decides its version shortly after it starts.
	testwait.For(t, 30*time.Second, "cluster version 3.7.0", func() (bool, string) {
		vs := state()
		return vs.Cluster == "3.7.0" && !vs.Downgrading, fmt.Sprintf("%+v", vs)
	})
	if err := a.EnableDowngrade(ctx(t), "3.5.35"); err == nil {
		t.Fatal("downgrade to 3.5 (two minors down) was enabled")
	}
	if vs := state(); vs.Downgrading {
		t.Fatalf("a refused downgrade left one in progress: %+v", vs)
	}
	if err := a.EnableDowngrade(ctx(t), "3.6.16"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "cluster version lowered to 3.6.0", func() (bool, string) {
		vs := state()
		return vs.Downgrading && vs.DowngradeTarget == "3.6.0" && vs.Cluster == "3.6.0", fmt.Sprintf("%+v", vs)
	})
	if err := a.CancelDowngrade(ctx(t)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "downgrade cancelled, cluster version 3.7.0", func() (bool, string) {
		vs := state()
		return !vs.Downgrading && vs.Cluster == "3.7.0", fmt.Sprintf("%+v", vs)
	})
}
