package restore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestRecoverHeldFromItsFirstServe: a recovery keeps its survivor's
// cluster ID, so nothing in the data holds the coordinators off it. From
// the moment the recovered member answers at its own client URL (where a
// coordinator whose session survived finds it), its recovery must already
// hold it (store.Hold), or that coordinator plans on the one-member
// cluster. A poller reads the hold at the survivor's client URL
// throughout the start; after StartTarget it must be there.
func TestRecoverHeldFromItsFirstServe(t *testing.T) { recoverHeldCheck(t, "") }

// TestRecoverHeldWithEtcdBinaries: the same under the etcd binaries (the
// exec runtime nico-agent forces a survivor with).
func TestRecoverHeldWithEtcdBinaries(t *testing.T) {
	t.Parallel()
	for _, b := range etcdtest.Binaries(t) {
		t.Run(b.Version, func(t *testing.T) { recoverHeldCheck(t, b.Path) })
	}
}

func recoverHeldCheck(t *testing.T, bin string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := startFleet(t, 3, bin)
	f.seed(ctx, fleetTime)
	for _, m := range f.Members[1:] {
		if err := m.Runtime.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(m.DataDir); err != nil {
			t.Fatal(err)
		}
	}
	survivors := Survey(ctx, f.urls(), nil, time.Second)
	j, err := RecoverJournal(survivors, []string{"cp-2", "cp-3"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	target := f.Members[0].ClientURL
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{target}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	st, err := store.New(cli, prefix)
	if err != nil {
		t.Fatal(err)
	}

	// The poller: every answer of the survivor's own URL before the
	// recovery's start is through must say held.
	var unheld atomic.Int64
	var answers atomic.Int64
	pctx, stopPoll := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for pctx.Err() == nil {
			// A client per read: no reconnection backoff hides an answer.
			pc, err := clientv3.New(clientv3.Config{Endpoints: []string{target}, DialTimeout: 200 * time.Millisecond, Logger: zap.NewNop()})
			if err != nil {
				continue
			}
			pst, err := store.New(pc, prefix)
			if err != nil {
				pc.Close()
				continue
			}
			rctx, c := context.WithTimeout(pctx, 300*time.Millisecond)
			why, _, _, err := pst.Hold(rctx, nil)
			c()
			pc.Close()
			if err == nil {
				answers.Add(1)
				if why == "" {
					unheld.Add(1)
				}
			}
		}
	})
	defer wg.Wait()
	defer stopPoll()

	checked := false
	r := &Runner{Fleet: f, Journal: FileJournal{Path: filepath.Join(t.TempDir(), "journal.json")}, Prefix: prefix,
		AfterStep: func(s Step) error {
			if s != StepStart {
				return nil
			}
			stopPoll()
			wg.Wait()
			checked = true
			rctx, c := context.WithTimeout(ctx, 5*time.Second)
			defer c()
			why, _, _, err := st.Hold(rctx, nil)
			if err != nil {
				return err
			}
			if why == "" {
				return errors.New("the recovered member serves at its own client URL and its recovery does not hold it")
			}
			t.Logf("after %s: %s", s, why)
			return nil
		}}
	if err := r.Run(ctx, j); err != nil {
		t.Fatal(err)
	}
	if !checked {
		t.Fatal("the run never passed StartTarget")
	}
	if n := unheld.Load(); n > 0 {
		t.Fatalf("%d of %d answers of the survivor's own URL during its start said not held", n, answers.Load())
	}
	t.Logf("%d answers of the survivor's own URL during its start, every one held", answers.Load())
	if why, _, _, err := st.Hold(ctx, nil); err != nil || why != "" {
		t.Fatalf("after the recovery: hold %q, %v; want released", why, err)
	}
}
