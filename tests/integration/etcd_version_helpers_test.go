package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Helpers of the etcd version tests (etcd_version_test.go): editing the
// EtcdCluster, waiting on the version controller and the nodes' reported
// versions, and a client workload that retries each write.

// setEtcdVersion writes spec.version, retrying on a concurrent status write.
func (f *fleet) setEtcdVersion(v string) {
	f.t.Helper()
	f.editEtcdCluster("spec.version "+v, func(ec *api.EtcdCluster) { ec.Spec.Version = v })
}

// editEtcdCluster changes the EtcdCluster, retrying on a concurrent write.
func (f *fleet) editEtcdCluster(what string, edit func(*api.EtcdCluster)) {
	f.t.Helper()
	st := f.Store()
	testwait.For(f.t, 10*time.Second, what+" written", func() (bool, string) {
		ec := &api.EtcdCluster{}
		if err := st.Get(f.t.Context(), store.EtcdClusterKey, ec); err != nil {
			return false, err.Error()
		}
		edit(ec)
		err := st.Update(f.t.Context(), store.EtcdClusterKey, ec)
		if errors.Is(err, store.ErrConflict) {
			return false, err.Error()
		}
		if err != nil {
			f.t.Fatal(err)
		}
		return true, ""
	})
}

// waitVersionPasses waits for n whole passes of the etcd-version
// controller that began after now.
func (f *fleet) waitVersionPasses(c *coord, n int) {
	f.t.Helper()
	last := time.Now()
	for i := range n {
		testwait.For(f.t, 30*time.Second, fmt.Sprintf("etcd-version pass %d", i+1), func() (bool, string) {
			for _, h := range c.C.Health() {
				if h.Name == "etcd-version" && h.LastSuccess.After(last) {
					last = h.LastSuccess
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v", c.C.Health())
		})
	}
}

// waitEtcdVersions waits until every named node reports running etcd v.
func (f *fleet) waitEtcdVersions(within time.Duration, v string, names ...string) {
	f.t.Helper()
	st := f.Store()
	testwait.For(f.t, within, "nodes "+fmt.Sprint(names)+" on etcd "+v, func() (bool, string) {
		var off []string
		for _, name := range names {
			n := &api.Node{}
			if err := st.Get(f.t.Context(), store.NodeKey(name), n); err != nil {
				return false, err.Error()
			}
			if n.Status.EtcdVersion != v {
				off = append(off, fmt.Sprintf("%s=%q %s", name, n.Status.EtcdVersion, n.Status.EtcdVersionError))
			}
		}
		return len(off) == 0, fmt.Sprint(off)
	})
}

// workload writes keys one after another, each retried until it succeeds
// or failAfter passes; a write that never succeeded is a failure.
type workload struct {
	cli    *clientv3.Client
	stop   chan struct{}
	done   sync.WaitGroup
	n      atomic.Int64 // acknowledged writes
	failed atomic.Int64
	errs   atomic.Int64 // attempts that failed and were retried
}

const failAfter = 20 * time.Second

func startWorkload(t *testing.T, cli *clientv3.Client) *workload {
	w := &workload{cli: cli, stop: make(chan struct{})}
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			key := fmt.Sprintf("workload/%06d", i)
			deadline := time.Now().Add(failAfter)
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := cli.Put(ctx, key, "v")
				cancel()
				if err == nil {
					w.n.Add(1)
					break
				}
				w.errs.Add(1)
				if time.Now().After(deadline) {
					t.Logf("write %s failed after %s of retries: %v", key, failAfter, err)
					w.failed.Add(1)
					break
				}
				select {
				case <-w.stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
	}()
	return w
}

// stopAndCheck ends the workload and checks that no write failed and every
// acknowledged write is there.
func (w *workload) stopAndCheck(t *testing.T) {
	t.Helper()
	close(w.stop)
	w.done.Wait()
	resp, err := w.cli.Get(t.Context(), "workload/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("workload: %d writes acknowledged, %d attempts retried, %d failed after retries", w.n.Load(), w.errs.Load(), w.failed.Load())
	if w.failed.Load() != 0 {
		t.Errorf("%d writes failed after %s of retries", w.failed.Load(), failAfter)
	}
	if resp.Count < w.n.Load() || w.n.Load() == 0 {
		t.Errorf("%d workload keys stored, %d writes acknowledged", resp.Count, w.n.Load())
	}
}
