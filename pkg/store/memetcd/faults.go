package memetcd

import (
	"context"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A Kind is a set of operation kinds a Fault matches.
type Kind int

// The kinds of operations. A Txn, or an Op of a transaction, is a Txn
// whatever it holds; Do's Op is the kind of the op.
const (
	Get Kind = 1 << iota
	Put
	Delete
	Txn
	Compact
	Watch
	// Lease is every call of the Lease API: Grant, Revoke, TimeToLive,
	// KeepAliveOnce and KeepAlive (whose failed channel closes at once).
	// A lease has no key: only a fault of no Prefix matches it.
	Lease
)

// ErrUnavailable is the error of a member that cannot be reached, as the
// client returns it: a fault's Err for "etcd is down".
var ErrUnavailable = status.Error(codes.Unavailable, "memetcd: injected: etcd unavailable")

// A Fault fails the operations it matches with Err. Counting only the
// operations it matches, it lets the first After through, then fails the
// next Times (0: every one from then on).
type Fault struct {
	// Kinds is which operations it matches; 0 is every kind.
	Kinds Kind
	// Prefix is which keys it matches; "" is every key. A transaction
	// matches when any key it compares, reads or writes does.
	Prefix string
	After  int
	Times  int
	Err    error
	// Applied lets a failed operation of the KV run before Err is
	// returned: an answer lost after etcd applied the request (a member
	// stopping, a connection broken, a request timed out as it
	// committed), which the caller cannot tell from one never applied.
	Applied bool

	seen, failed int
}

func (f *Fault) matches(kind Kind, keys []string) bool {
	if f.Kinds != 0 && f.Kinds&kind == 0 {
		return false
	}
	if kind == Lease {
		return f.Prefix == ""
	}
	for _, k := range keys {
		if strings.HasPrefix(k, f.Prefix) {
			return true
		}
	}
	return false
}

// Faults is a set of faults injected into the KV, Watcher and Lease it
// wraps (Wrap, KV, Watcher, Lease). It is safe for concurrent use; a test may add and
// clear faults while the code under test runs.
type Faults struct {
	mu     sync.Mutex
	faults []*Fault
	failed int
}

// Add injects f from now on.
func (fs *Faults) Add(f Fault) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.faults = append(fs.faults, &f)
}

// Clear removes every fault: operations pass again.
func (fs *Faults) Clear() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.faults = nil
}

// Failed counts the operations the faults failed.
func (fs *Faults) Failed() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.failed
}

// check returns the error of the first fault that fails an operation of
// kind on keys, counting it against every fault it matches.
func (fs *Faults) check(kind Kind, keys []string) error {
	err, _ := fs.checkApplied(kind, keys)
	return err
}

// checkApplied is check, and whether the failing fault lets the
// operation run first (Fault.Applied).
func (fs *Faults) checkApplied(kind Kind, keys []string) (err error, applied bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, f := range fs.faults {
		if !f.matches(kind, keys) {
			continue
		}
		f.seen++
		if f.seen <= f.After || (f.Times > 0 && f.failed >= f.Times) || err != nil {
			continue
		}
		f.failed++
		err, applied = f.Err, f.Applied
	}
	if err != nil {
		fs.failed++
	}
	return err, applied
}

// Wrap makes cli's KV, Watcher and Lease fail as fs says. Wrapping a Store's
// client (store.Store.Client) after store.New matches keys as the store
// names them, without its prefix.
func (fs *Faults) Wrap(cli *clientv3.Client) {
	cli.KV = fs.KV(cli.KV)
	cli.Watcher = fs.Watcher(cli.Watcher)
	cli.Lease = fs.Lease(cli.Lease)
}

// KV returns kv failing as fs says.
func (fs *Faults) KV(kv clientv3.KV) clientv3.KV { return &faultyKV{KV: kv, fs: fs} }

// Watcher returns w failing as fs says: a failed watch's channel closes
// at once, as a watch whose stream failed does.
func (fs *Faults) Watcher(w clientv3.Watcher) clientv3.Watcher {
	return &faultyWatcher{Watcher: w, fs: fs}
}

type faultyKV struct {
	clientv3.KV
	fs *Faults
}

func (kv *faultyKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if err, applied := kv.fs.checkApplied(Get, []string{key}); err != nil {
		if applied {
			_, _ = kv.KV.Get(ctx, key, opts...)
		}
		return nil, err
	}
	return kv.KV.Get(ctx, key, opts...)
}

func (kv *faultyKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	if err, applied := kv.fs.checkApplied(Put, []string{key}); err != nil {
		if applied {
			_, _ = kv.KV.Put(ctx, key, val, opts...)
		}
		return nil, err
	}
	return kv.KV.Put(ctx, key, val, opts...)
}

func (kv *faultyKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	if err, applied := kv.fs.checkApplied(Delete, []string{key}); err != nil {
		if applied {
			_, _ = kv.KV.Delete(ctx, key, opts...)
		}
		return nil, err
	}
	return kv.KV.Delete(ctx, key, opts...)
}

func (kv *faultyKV) Compact(ctx context.Context, rev int64, opts ...clientv3.CompactOption) (*clientv3.CompactResponse, error) {
	if err := kv.fs.check(Compact, []string{""}); err != nil {
		return nil, err
	}
	return kv.KV.Compact(ctx, rev, opts...)
}

func (kv *faultyKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	if err, applied := kv.fs.checkApplied(kindOf(op), opKeys(op)); err != nil {
		if applied {
			_, _ = kv.KV.Do(ctx, op)
		}
		return clientv3.OpResponse{}, err
	}
	return kv.KV.Do(ctx, op)
}

func (kv *faultyKV) Txn(ctx context.Context) clientv3.Txn {
	return &faultyTxn{Txn: kv.KV.Txn(ctx), fs: kv.fs}
}

func kindOf(op clientv3.Op) Kind {
	switch {
	case op.IsGet():
		return Get
	case op.IsPut():
		return Put
	case op.IsDelete():
		return Delete
	}
	return Txn
}

// opKeys lists the keys op names, those of a transaction's operations
// and comparisons included.
func opKeys(op clientv3.Op) []string {
	if !op.IsTxn() {
		return []string{string(op.KeyBytes())}
	}
	cmps, then, els := op.Txn()
	return txnKeys(cmps, then, els)
}

func txnKeys(cmps []clientv3.Cmp, then, els []clientv3.Op) []string {
	var keys []string
	for _, c := range cmps {
		keys = append(keys, string(c.KeyBytes()))
	}
	for _, op := range append(append([]clientv3.Op(nil), then...), els...) {
		keys = append(keys, opKeys(op)...)
	}
	return keys
}

// faultyTxn records what it is given, and asks the faults on Commit.
type faultyTxn struct {
	clientv3.Txn
	fs        *Faults
	cmps      []clientv3.Cmp
	then, els []clientv3.Op
}

func (t *faultyTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.cmps = append(t.cmps, cs...)
	t.Txn = t.Txn.If(cs...)
	return t
}

func (t *faultyTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.then = append(t.then, ops...)
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *faultyTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.els = append(t.els, ops...)
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *faultyTxn) Commit() (*clientv3.TxnResponse, error) {
	if err, applied := t.fs.checkApplied(Txn, txnKeys(t.cmps, t.then, t.els)); err != nil {
		if applied {
			_, _ = t.Txn.Commit()
		}
		return nil, err
	}
	return t.Txn.Commit()
}

type faultyWatcher struct {
	clientv3.Watcher
	fs *Faults
}

func (w *faultyWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	if err := w.fs.check(Watch, []string{key}); err != nil {
		ch := make(chan clientv3.WatchResponse)
		close(ch)
		return ch
	}
	return w.Watcher.Watch(ctx, key, opts...)
}
