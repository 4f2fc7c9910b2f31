package coordinator

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// writeAfterFirstRead is the store's KV with a hook: once the first read
// (a Get or a transaction) has returned, write runs, as another writer
// between two reads of one pass would.
type writeAfterFirstRead struct {
	clientv3.KV
	once  sync.Once
	write func()
	reads int
}

func (k *writeAfterFirstRead) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := k.KV.Get(ctx, key, opts...)
	k.reads++
	k.once.Do(k.write)
	return resp, err
}

func (k *writeAfterFirstRead) Txn(ctx context.Context) clientv3.Txn {
	return &hookedTxn{Txn: k.KV.Txn(ctx), k: k}
}

type hookedTxn struct {
	clientv3.Txn
	k *writeAfterFirstRead
}

func (t *hookedTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *hookedTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *hookedTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }
func (t *hookedTxn) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.Txn.Commit()
	t.k.reads++
	t.k.once.Do(t.k.write)
	return resp, err
}

// TestObserveReadsAtOneRevision: a writer that changes the store between
// the reads of one observation (it files a join for a new node, and
// replaces the active operation) changes nothing the pass sees: every
// object comes from the revision of its first read. Before, each input was
// read at its own revision, and the pass saw the new join without its
// node, and the new operation.
func TestObserveReadsAtOneRevision(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	ctx := t.Context()
	put := func(key string, o api.Object) {
		t.Helper()
		if err := st.Put(ctx, key, o); err != nil {
			t.Fatal(err)
		}
	}
	n := api.NewNode("cp-1")
	put(store.NodeKey("cp-1"), n)
	first := api.NewOperation("op-1")
	first.Spec.Type = api.OpJoin
	put(store.OpKey("op-1"), first)
	if _, err := st.Client().Put(ctx, store.ActiveOpKey, "op-1"); err != nil {
		t.Fatal(err)
	}

	before, err := st.Client().Get(ctx, store.ActiveOpKey)
	if err != nil {
		t.Fatal(err)
	}
	kv := st.Client().KV
	// The writer goes around the hook.
	putRaw := func(key string, o api.Object) {
		op, err := store.PutOp(key, o)
		if err == nil {
			_, err = kv.Do(ctx, op)
		}
		if err != nil {
			t.Error(err)
		}
	}
	hook := &writeAfterFirstRead{KV: kv, write: func() {
		putRaw(store.NodeKey("late"), api.NewNode("late"))
		j := api.NewJoinRequest("late")
		j.Spec.Node = "late"
		putRaw(store.JoinKey("late"), j)
		next := api.NewOperation("op-2")
		next.Spec.Type = api.OpRemove
		putRaw(store.OpKey("op-2"), next)
		if _, err := kv.Put(ctx, store.ActiveOpKey, "op-2"); err != nil {
			t.Error(err)
		}
		if _, err := kv.Delete(ctx, store.OpKey("op-1")); err != nil {
			t.Error(err)
		}
	}}
	st.Client().KV = hook
	t.Cleanup(func() { st.Client().KV = kv })

	obs, err := observe(ctx, st, func(context.Context) ([]membership.Member, error) { return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	if obs.Active == nil || obs.Active.Metadata.Name != "op-1" {
		t.Errorf("active operation %v, want op-1 as of the first read", obs.Active)
	}
	if slices.ContainsFunc(obs.Joins, func(j *api.JoinRequest) bool { return j.Metadata.Name == "late" }) {
		t.Error("observed the join filed after the first read")
	}
	if slices.ContainsFunc(obs.Nodes, func(n *api.Node) bool { return n.Metadata.Name == "late" }) {
		t.Error("observed the node registered after the first read")
	}
	if obs.rev != before.Header.Revision {
		t.Errorf("observed at revision %d, want %d (the store's before the writer)", obs.rev, before.Header.Revision)
	}
	if hook.reads != 2 {
		t.Errorf("%d reads, want 2: one transaction of every input, the journal entry at its revision", hook.reads)
	}
	// The next pass sees the writer's changes.
	obs, err = observe(ctx, st, func(context.Context) ([]membership.Member, error) { return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	if obs.Active == nil || obs.Active.Metadata.Name != "op-2" || len(obs.Joins) != 1 || len(obs.Nodes) != 2 {
		t.Errorf("next pass: active %v, %d joins, %d nodes; want op-2, 1, 2", obs.Active, len(obs.Joins), len(obs.Nodes))
	}
}
