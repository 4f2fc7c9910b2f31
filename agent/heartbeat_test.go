package agent

import (
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// heartbeatLease is the lease the node's heartbeat key is on; 0: no key.
func heartbeatLease(t *testing.T, st *store.Store, name string) clientv3.LeaseID {
	t.Helper()
	resp, err := st.Client().Get(t.Context(), store.HeartbeatKey(name))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

// TestHeartbeatRegrantsALostLease: the heartbeat controller puts the key
// on a lease it keeps alive; when the lease is revoked behind its back
// (as when it expired), the key is back at once on a new lease, without
// waiting for the resync tick; when the controller stops, it revokes its
// lease and the key goes.
func TestHeartbeatRegrantsALostLease(t *testing.T) {
	st := oneMemberStore(t)
	a := New(Config{Name: "w-1", Roles: []api.Role{api.RoleWorker}, HeartbeatTTL: time.Hour}, nil, quietNotifier{}, logging.Test(t))
	a.use(st.Client(), st)
	hb := a.newHeartbeat()
	g := (&groups{rt: a.rt}).start(t.Context(), hb)
	var first clientv3.LeaseID
	waitFor(t, 10*time.Second, "the heartbeat key", func() bool { first = heartbeatLease(t, st, "w-1"); return first != 0 })
	if _, err := st.Client().Revoke(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the key on a new lease", func() bool {
		l := heartbeatLease(t, st, "w-1")
		return l != 0 && l != first
	})
	g.stop()
	hb.wait()
	if l := heartbeatLease(t, st, "w-1"); l != 0 {
		t.Errorf("the key is still there on lease %x after the heartbeat stopped", l)
	}
}
