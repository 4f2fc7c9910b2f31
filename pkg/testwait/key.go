package testwait

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// KeyCond reports whether key's value kv (nil while the key is absent) is
// the awaited state and, when it is not, why not.
type KeyCond func(kv *mvccpb.KeyValue) (ok bool, why string)

// KeyUntil reads key through cli and then watches it from the revision
// after the read, checking cond on the value read and on every change,
// until cond holds (nil), within has passed (an error wrapping ErrDeadline
// with cond's last reason) or ctx ends. A watch that fails (a compacted
// revision, a lost member) is followed by a new read and watch.
func KeyUntil(ctx context.Context, cli *clientv3.Client, key string, within time.Duration, cond KeyCond) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	why := "not read yet"
	fail := func(err error) error {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%w (%s); last: %s", ErrDeadline, within, why)
		}
		return fmt.Errorf("testwait: key %s: %w; last: %s", key, err, why)
	}
	for {
		kv, rev, err := store.GetThrough(ctx, cli, key)
		if err != nil {
			if ctx.Err() != nil {
				return fail(ctx.Err())
			}
			why = err.Error()
			select { // a short pause before the next read, not a wait for the condition
			case <-ctx.Done():
			case <-time.After(Interval):
			}
			continue
		}
		var ok bool
		if ok, why = cond(kv); ok {
			return nil
		}
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range store.WatchRange(wctx, cli, store.Key(key), rev+1) {
			if err := wr.Err(); err != nil {
				why = err.Error()
				break
			}
			for _, ev := range wr.Events {
				kv = ev.Kv
				if ev.Type == clientv3.EventTypeDelete {
					kv = nil
				}
				if ok, why = cond(kv); ok {
					wcancel()
					return nil
				}
			}
		}
		wcancel()
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
	}
}

// Key fails t with what and cond's last reason unless cond holds for key
// within the duration and before t's context ends; it waits on a watch of
// key, not by polling. Like For, it is not for Cleanup functions.
func Key(t testing.TB, cli *clientv3.Client, key string, within time.Duration, what string, cond KeyCond) {
	t.Helper()
	if err := KeyUntil(t.Context(), cli, key, within, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
