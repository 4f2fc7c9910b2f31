package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/restore"
	"github.com/homystack/nico/pkg/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ackedWriter puts /app/w/N, N counting up, until stopped, and keeps
// each put its cluster acknowledged with that cluster's ID.
type ackedWriter struct {
	mu    sync.Mutex
	acked []ackedPut
	stop  context.CancelFunc
	done  chan struct{}
}

type ackedPut struct {
	key, value string
	cluster    uint64
}

func startWriter(ctx context.Context, cli *clientv3.Client) *ackedWriter {
	ctx, cancel := context.WithCancel(ctx)
	w := &ackedWriter{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; ctx.Err() == nil; i++ {
			key, val := fmt.Sprintf("/app/w/%06d", i), fmt.Sprint(i)
			pctx, c := context.WithTimeout(ctx, time.Second)
			resp, err := cli.Put(pctx, key, val)
			c()
			if err == nil {
				w.mu.Lock()
				w.acked = append(w.acked, ackedPut{key, val, resp.Header.ClusterId})
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// end stops the writer and returns its acknowledged puts.
func (w *ackedWriter) end() []ackedPut {
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.acked)
}

// TestRestoreRunAgainAfterAFailedHandBack: a restore through the agents
// whose last hand-back fails (cp-3's agent does not serve its member
// within --hand-back-wait) fails naming it and advising to run the same
// command again. Run again while cp-3's agent is still down, the command
// finds the operation done, hands back only cp-3 (waiting for its agent to
// come back and serve), and does nothing else: no stop, fence, restore,
// serve or rejoin reaches an agent. A client writes throughout: every
// write the restored cluster acknowledged is there at the end.
func TestRestoreRunAgainAfterAFailedHandBack(t *testing.T) {
	t.Parallel()
	nicoctlBin(t)
	f := newFleet(t)
	names := f.growRecoveryVoters(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli := f.Client()
	f.putAppKeys(ctx, cli)
	snap, _ := f.snapshotAppKeys(ctx, cli)
	hosts := serveRecovery(f, names...)
	letGo := hosts.heldBack("cp-3")
	defer letGo()
	w := startWriter(ctx, f.Client())
	defer w.end()

	root := etcdtest.IssueFiles(t, f.TempDir(), pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient})
	journal := filepath.Join(f.TempDir(), "journal.json")
	args := []string{"--endpoints", strings.Join(f.Endpoints(), ","), "--tls.caFile", root.CA, "--tls.certFile", root.Cert, "--tls.keyFile", root.Key,
		"restore", "--from", snap, "--agents", hosts.addr("cp-1"), "--journal", journal, "--bump-revision", "1000000", "--hand-back-wait", "5s"}
	code, out, errOut := runNicoctl(t, args...)
	t.Logf("nicoctl restore:\n%s%s", out, errOut)
	if code == 0 || !strings.Contains(errOut, "cp-3's agent does not serve its member within 5s") || !strings.Contains(errOut, "run the same command again") {
		t.Fatalf("restore with cp-3's agent held back: exit %d, want a failure naming cp-3 and advising to run again", code)
	}
	j, _, err := restore.FileJournal{Path: journal}.Load()
	if err != nil || j.Step != restore.StepDone {
		t.Fatalf("journal %+v %v, want done", j, err)
	}

	// Run again while cp-3's agent is still down; it comes back once the
	// run hands cp-3 back.
	mutating := []string{restore.PathStop, restore.PathSnapshot, restore.PathRestore, restore.PathServe, restore.PathRejoin}
	count := func() (n int) {
		for _, node := range names {
			for _, p := range mutating {
				n += hosts.called(node, p)
			}
		}
		return n
	}
	before, released := count(), hosts.called("cp-3", restore.PathRelease)
	type result struct {
		code     int
		out, err string
	}
	again := make(chan result, 1)
	go func() {
		c, o, e := runNicoctl(t, slices.Concat(args[:len(args)-2], []string{"--hand-back-wait", "2m"})...)
		again <- result{c, o, e}
	}()
	testwait.For(t, time.Minute, "the run again hands cp-3 back", func() (bool, string) {
		n := hosts.called("cp-3", restore.PathRelease)
		return n > released, fmt.Sprintf("%d release calls on cp-3", n)
	})
	letGo()
	r := <-again
	t.Logf("nicoctl restore again:\n%s%s", r.out, r.err)
	if r.code != 0 || !strings.Contains(r.out, "[cp-3] handed back to their agents now") || !strings.Contains(r.out, "nothing else done") {
		t.Fatalf("the same command again: exit %d, want cp-3 alone handed back and nothing else done", r.code)
	}
	if n := count() - before; n != 0 {
		t.Fatalf("the run again made %d stop, snapshot, restore, serve or rejoin calls, want none", n)
	}
	f.WaitVoters(90*time.Second, names...)
	f.waitOpSucceeded(ctx, j.ID)

	acked := w.end()
	var restored int
	for _, p := range acked {
		if p.cluster != j.NewClusterID {
			continue // the old cluster's: the restore's cut
		}
		restored++
		resp, err := cli.Get(ctx, p.key)
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != p.value {
			t.Fatalf("%s = %s, acknowledged by the restored cluster: %v %v", p.key, p.value, resp, err)
		}
	}
	if restored == 0 {
		t.Fatalf("none of %d acknowledged writes is the restored cluster's (%x)", len(acked), j.NewClusterID)
	}
	t.Logf("%d writes acknowledged, %d by the restored cluster, every one of those there", len(acked), restored)
	if got := voterNames(t, ctx, cli); !slices.Equal(got, names) {
		t.Fatalf("voters %v, want %v", got, names)
	}
}
