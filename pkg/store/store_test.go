package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

func newStore(t *testing.T, c *etcdtest.Cluster) *Store {
	t.Helper()
	s, err := New(etcdtest.NewClient(t, c.Endpoints()...), DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestStore(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := newStore(t, c)
	raw := etcdtest.NewClient(t, c.Endpoints()...)

	t.Run("create then conflict", func(t *testing.T) {
		n := api.NewNode("cp-1")
		n.Spec.Roles = []api.Role{api.RoleControlPlane}
		if err := s.Create(ctx(t), NodeKey("cp-1"), n); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx(t), NodeKey("cp-1"), n); !errors.Is(err, ErrExists) {
			t.Fatalf("second create: %v, want ErrExists", err)
		}
		// The key lives under the prefix, seen by an unscoped client.
		resp, err := raw.Get(ctx(t), DefaultPrefix+NodeKey("cp-1"))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("raw get: %v %v", resp, err)
		}
	})

	t.Run("compare and swap", func(t *testing.T) {
		a, b := &api.Node{}, &api.Node{}
		if err := s.Get(ctx(t), NodeKey("cp-1"), a); err != nil {
			t.Fatal(err)
		}
		if err := s.Get(ctx(t), NodeKey("cp-1"), b); err != nil {
			t.Fatal(err)
		}
		a.Status.Phase = api.NodeJoining
		if err := s.Update(ctx(t), NodeKey("cp-1"), a); err != nil {
			t.Fatal(err)
		}
		b.Status.Phase = api.NodeFailed
		if err := s.Update(ctx(t), NodeKey("cp-1"), b); !errors.Is(err, ErrConflict) {
			t.Fatalf("stale update: %v, want ErrConflict", err)
		}
		got := &api.Node{}
		if err := s.Get(ctx(t), NodeKey("cp-1"), got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != api.NodeJoining {
			t.Fatalf("phase = %q, the stale write won", got.Status.Phase)
		}
	})

	t.Run("list and not found", func(t *testing.T) {
		for _, name := range []string{"cp-2", "cp-3"} {
			if err := s.Put(ctx(t), NodeKey(name), api.NewNode(name)); err != nil {
				t.Fatal(err)
			}
		}
		nodes, rev, err := List[api.Node](ctx(t), s, NodesDir)
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes) != 3 || nodes[0].Metadata.Name != "cp-1" || rev == 0 {
			t.Fatalf("list = %d nodes at rev %d", len(nodes), rev)
		}
		if err := s.Get(ctx(t), NodeKey("nope"), &api.Node{}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get missing: %v", err)
		}
	})

	t.Run("foreign apiVersion is refused", func(t *testing.T) {
		if _, err := raw.Put(ctx(t), DefaultPrefix+NodeKey("odd"), `{"apiVersion":"nico.homystack.io/v9","kind":"Node"}`); err != nil {
			t.Fatal(err)
		}
		err := s.Get(ctx(t), NodeKey("odd"), &api.Node{})
		if err == nil || !contains(err.Error(), "v9") {
			t.Fatalf("err = %v, want one naming the version", err)
		}
	})

	t.Run("KubernetesCluster's own apiVersion", func(t *testing.T) {
		k := api.NewKubernetesCluster("k1")
		if err := s.CreateObject(ctx(t), k); err != nil {
			t.Fatal(err)
		}
		got := &api.KubernetesCluster{}
		if err := s.Get(ctx(t), ClusterKey("k1"), got); err != nil || got.APIVersion != api.ClusterAPIVersion {
			t.Fatalf("read back %+v, %v", got.TypeMeta, err)
		}
		if _, err := raw.Put(ctx(t), DefaultPrefix+ClusterKey("k2"), `{"apiVersion":"nico.homystack.io/v1","kind":"KubernetesCluster"}`); err != nil {
			t.Fatal(err)
		}
		if err := s.Get(ctx(t), ClusterKey("k2"), &api.KubernetesCluster{}); err == nil || !contains(err.Error(), api.ClusterAPIVersion) {
			t.Fatalf("err = %v, want one naming %s", err, api.ClusterAPIVersion)
		}
	})

	t.Run("deprecated apiVersion is read as the current one and rewritten", func(t *testing.T) {
		old := `{"apiVersion":"nico.homystack.com/v1alpha1","kind":"KubernetesCluster","metadata":{"name":"k3"}}`
		if _, err := raw.Put(ctx(t), DefaultPrefix+ClusterKey("k3"), old); err != nil {
			t.Fatal(err)
		}
		got := &api.KubernetesCluster{}
		if err := s.Get(ctx(t), ClusterKey("k3"), got); err != nil || got.APIVersion != api.ClusterAPIVersion {
			t.Fatalf("read %+v, %v; want it read as %s", got.TypeMeta, err, api.ClusterAPIVersion)
		}
		if err := s.UpdateObject(ctx(t), got); err != nil {
			t.Fatal(err)
		}
		if resp, err := raw.Get(ctx(t), DefaultPrefix+ClusterKey("k3")); err != nil || !contains(string(resp.Kvs[0].Value), `"apiVersion":"`+api.ClusterAPIVersion+`"`) {
			t.Fatalf("rewritten as %v, %v", resp, err)
		}
		cfg := `{"apiVersion":"nico.homystack.io/v1","kind":"NixosConfiguration","metadata":{"name":"m1",
			"ownerReferences":[{"apiVersion":"nico.homystack.com/v1alpha1","kind":"KubernetesCluster","name":"k3"}]}}`
		if _, err := raw.Put(ctx(t), DefaultPrefix+NixosConfigKey("m1"), cfg); err != nil {
			t.Fatal(err)
		}
		cfgs, _, err := List[api.NixosConfiguration](ctx(t), s, NixosConfigKey(""))
		if err != nil || len(cfgs) != 1 || cfgs[0].Metadata.OwnerReferences[0] != kubeOwner("k3") {
			t.Fatalf("list = %+v, %v; want the owner reference read as %s", cfgs, err, api.ClusterAPIVersion)
		}
	})

	t.Run("bad prefix", func(t *testing.T) {
		if _, err := New(etcdtest.NewClient(t, c.Endpoints()...), "nico"); err == nil {
			t.Fatal("prefix without slashes accepted")
		}
	})
}

func TestFencedTxnRefusesDeposedLeader(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := newStore(t, c)

	campaign := func(name string) (*concurrency.Session, Fence) {
		sess, err := concurrency.NewSession(s.Client(), concurrency.WithTTL(5))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close() })
		e := concurrency.NewElection(sess, ElectionPrefix)
		if err := e.Campaign(ctx(t), name); err != nil {
			t.Fatal(err)
		}
		return sess, Fence{Key: e.Key(), Rev: e.Rev()}
	}
	sessA, fenceA := campaign("a")
	op, _ := PutOp("decision", api.NewOperation("x"))
	if _, err := s.FencedTxn(ctx(t), fenceA, nil, op); err != nil {
		t.Fatalf("leader write: %v", err)
	}

	// A guard that fails is reported with its own error.
	errBusy := errors.New("busy")
	guard := Guard{Cmp: clientv3.Compare(clientv3.CreateRevision("decision"), "=", 0), Err: errBusy}
	if _, err := s.FencedTxn(ctx(t), fenceA, []Guard{guard}, op); !errors.Is(err, errBusy) {
		t.Fatalf("guarded write: %v, want errBusy", err)
	}

	if err := s.Leads(ctx(t), fenceA); err != nil {
		t.Fatalf("leader's Leads: %v", err)
	}

	// A loses its session; B is elected; A's write must not land.
	sessA.Close()
	_, fenceB := campaign("b")
	if _, err := s.FencedTxn(ctx(t), fenceA, nil, op); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("deposed write: %v, want ErrNotLeader", err)
	}
	// Leads confirms a term, or says it is over, and writes nothing.
	before, err := s.Client().Get(ctx(t), "decision")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Leads(ctx(t), fenceA); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("deposed leader's Leads: %v, want ErrNotLeader", err)
	}
	if err := s.Leads(ctx(t), fenceB); err != nil {
		t.Fatalf("new leader's Leads: %v", err)
	}
	after, err := s.Client().Get(ctx(t), "decision")
	if err != nil {
		t.Fatal(err)
	}
	if after.Header.Revision != before.Header.Revision {
		t.Fatalf("revision %d after Leads, want %d: it wrote", after.Header.Revision, before.Header.Revision)
	}
	if _, err := s.FencedTxn(ctx(t), fenceB, nil, op); err != nil {
		t.Fatalf("new leader write: %v", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func kubeOwner(name string) api.OwnerReference {
	return api.OwnerReference{APIVersion: api.ClusterAPIVersion, Kind: api.KindKubernetesCluster, Name: name}
}
