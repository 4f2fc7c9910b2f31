package etcdadmin_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/testwait"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// TestMoveLeaderClientStall measures what clients see while etcd moves
// leadership to a caught-up voter (what a rollout's and a removal's
// TransferLeader step ask): writers put in a loop on every member's
// endpoint of a three-member cluster while leadership moves back and forth.
// A put that reaches the leader during the transfer fails at once ("raft
// proposal dropped"); one sent to a follower is forwarded to the leader,
// which drops it without an answer, and it fails only at the follower's
// request timeout (5 s + 2 x the election timeout; here 6 s), or sooner at
// the client's own deadline. docs/rollouts.md quotes its figures:
//
//	NICO_TRANSFER_STALL=1 go test -count=1 -v -run TestMoveLeaderClientStall ./pkg/etcdadmin/
func TestMoveLeaderClientStall(t *testing.T) {
	t.Parallel()
	if os.Getenv("NICO_TRANSFER_STALL") != "1" {
		t.Skip("a measurement (about 20 s): set NICO_TRANSFER_STALL=1")
	}
	const transfers, writers = 20, 4
	c := etcdtest.Start(t, 3)
	admin := etcdtest.NewClient(t, c.Endpoints()...)
	ctx := t.Context()

	type tally struct {
		mu                  sync.Mutex
		puts, dropped, hung int
		longest             time.Duration
		errs                map[string]int
	}
	stop := make(chan struct{})
	var acked atomic.Int64 // puts acknowledged, every writer
	var wg sync.WaitGroup
	tallies := map[string]*tally{}
	for _, ep := range c.Endpoints() {
		tl := &tally{errs: map[string]int{}}
		tallies[ep] = tl
		cli := etcdtest.NewClient(t, ep) // pinned to this member
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					start := time.Now()
					pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
					_, err := cli.Put(pctx, fmt.Sprintf("/stall/%s/%d/%d", ep, w, i), "v")
					cancel()
					d := time.Since(start)
					if err == nil {
						acked.Add(1)
					}
					tl.mu.Lock()
					tl.puts++
					tl.longest = max(tl.longest, d)
					switch {
					case err != nil && d < time.Second:
						tl.dropped++
						tl.errs[err.Error()]++
					case err != nil:
						tl.hung++
						tl.errs[fmt.Sprintf("%s (after %v)", err, d.Round(time.Second))]++
					}
					tl.mu.Unlock()
				}
			}()
		}
	}
	var took []time.Duration
	for range transfers {
		// Writes flow between transfers: a hundred more acknowledged.
		want := acked.Load() + 100
		testwait.True(t, 30*time.Second, "100 puts acknowledged between transfers", func() bool { return acked.Load() >= want })
		st, err := admin.Status(ctx, c.Endpoints()[0])
		if err != nil {
			t.Fatal(err)
		}
		ml, err := admin.MemberList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var to uint64
		var leaderURL string
		for _, m := range ml.Members {
			if m.ID == st.Leader {
				leaderURL = m.ClientURLs[0]
			} else if to == 0 {
				to = m.ID
			}
		}
		start := time.Now()
		if _, err := etcdtest.NewClient(t, leaderURL).MoveLeader(ctx, to); err != nil && !errors.Is(err, rpctypes.ErrLeaderChanged) {
			t.Fatalf("move leader to %x: %v", to, err)
		}
		took = append(took, time.Since(start))
	}
	close(stop)
	wg.Wait()
	t.Logf("%d transfers to a caught-up voter, each %v to %v", transfers, slices.Min(took).Round(time.Millisecond), slices.Max(took).Round(time.Millisecond))
	for ep, tl := range tallies {
		t.Logf("%s: %d puts, %d failed at once, %d hung, longest %v: %v",
			ep, tl.puts, tl.dropped, tl.hung, tl.longest.Round(time.Millisecond), tl.errs)
	}
}
