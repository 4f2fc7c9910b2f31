package etcdadmin

import (
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/etcdtest/leakcheck"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

// TestObserveWhileAutoSync: Observe asks every member for its status at
// once while the client's auto-sync rewrites its endpoints. etcd 3.7's
// Status dialled a connection per call from the shared client, reading its
// endpoints unlocked: a data race under -race. Status goes through
// per-member clients now, which never sync.
func TestObserveWhileAutoSync(t *testing.T) {
	cl := etcdtest.Start(t, 3)
	ignore := settled(t, cl)
	cli := etcdtest.Dial(t, pki.RootIdentity, 5*time.Millisecond, cl.Endpoints()...)
	t.Cleanup(func() { cli.Close() })
	a := New(cli, etcdtest.CallBudget)
	t.Cleanup(a.Close)

	var first map[string]*clientv3.Client
	for range 40 {
		ms, err := a.Observe(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 3 {
			t.Fatalf("observed %d members, want 3", len(ms))
		}
		for _, m := range ms {
			if !m.Healthy {
				t.Fatalf("member %s unhealthy", m.Name)
			}
		}
		// One client per member, kept from one Observe to the next.
		now := map[string]*clientv3.Client{}
		for _, u := range a.members.urls() {
			now[u], _ = a.members.get(u)
		}
		if first == nil {
			first = now
		}
		if !maps.Equal(now, first) || len(now) != 3 {
			t.Fatalf("member clients %v, then %v: want the same 3", first, now)
		}
	}
	a.Close()
	if _, err := a.members.get(cl.Members[0].ClientURL); !errors.Is(err, ErrClosed) {
		t.Fatalf("member client after Close: %v, want ErrClosed", err)
	}
	// Closed, the Admin and its client leave no goroutine behind.
	cli.Close()
	goleak.VerifyNone(t, append(leakcheck.WhileServing(), ignore)...)
}

// TestClosingTheClientClosesTheMemberClients: an Admin whose caller never
// closes it lets its member clients go with the cluster-wide client.
func TestClosingTheClientClosesTheMemberClients(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	ignore := settled(t, cl)
	cli := etcdtest.Dial(t, pki.RootIdentity, 0, cl.Endpoints()...)
	a := New(cli, etcdtest.CallBudget)
	if _, err := a.Observe(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if n := len(a.members.urls()); n != 1 {
		t.Fatalf("%d member clients, want 1", n)
	}
	cli.Close()
	testwait.For(t, 10*time.Second, "the member clients closed", func() (bool, string) {
		_, err := a.members.get(cl.Members[0].ClientURL)
		return errors.Is(err, ErrClosed), fmt.Sprintf("member client after the client closed: %v", err)
	})
	goleak.VerifyNone(t, append(leakcheck.WhileServing(), ignore)...)
}

// settled waits until every member of cl has served a client, so that the
// servers' own goroutines have started, and returns them to ignore.
func settled(t *testing.T, cl *etcdtest.Cluster) goleak.Option {
	t.Helper()
	for _, m := range cl.Members {
		cli := etcdtest.Dial(t, pki.RootIdentity, 0, m.ClientURL)
		_, err := cli.Get(ctx(t), "settle")
		cli.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return goleak.IgnoreCurrent()
}
