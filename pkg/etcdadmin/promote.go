package etcdadmin

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/homystack/nico/pkg/api"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// PromoteEvery is how often Promote asks etcd to promote a learner that
// is not in sync yet, once the learner is past its first PromoteSoonFor.
// etcd answers that from the leader's own view of the learner's log,
// without a raft round, so a short fixed interval costs little and
// promotes within PromoteEvery of etcd allowing it; a backoff that grows
// to a second made the promotion wait for its next tick.
const PromoteEvery = 10 * time.Millisecond

// PromoteSoon is the pause after a refused try during the first
// PromoteSoonFor of a promotion. A learner on a store past etcd's first
// in-memory snapshot is sent the snapshot and is in sync a millisecond or
// two after it restores it; traced joins (docs/join-speed.md, `-nico.trace`)
// had their last refusal within 2 ms of that restore in every join, and
// then waited 7-11 ms for the next try every PromoteEvery.
const (
	PromoteSoon    = 2 * time.Millisecond
	PromoteSoonFor = time.Second
)

// promoteEvery and promoteSoonFor are the constants above; tests change
// them to see a TryAgainOn receive bring a try forward.
var (
	promoteEvery   = PromoteEvery
	promoteSoonFor = PromoteSoonFor
)

// promotePause is how long Promote waits after a refused try, since
// elapsed after its first one: PromoteSoon while the learner is new, then
// PromoteEvery. The pause runs from the end of the refused try, so an
// answer that came late (the leader busy sending the snapshot) is not
// followed at once by another.
func promotePause(elapsed time.Duration) time.Duration {
	if elapsed < promoteSoonFor {
		return PromoteSoon
	}
	return promoteEvery
}

// progressEvery is how often Promote reads the learner's raft index
// meanwhile, for its progress report.
const progressEvery = 100 * time.Millisecond

// Promote promotes learner id once it serves clients and etcd accepts
// it. Right before each MemberPromote it asks the learner's own status at
// learnerURL, over the learner's client, within the health timeout: only
// an answer from member id itself lets the try go on (a voter that does
// not serve counts against quorum, and etcd promotes a learner whose log
// is in sync before it has published itself); otherwise the try counts as
// refused, with ErrNotServing. It asks the leader at leaderURL, or the
// voters' client URLs when the leader is not known (a learner cannot serve
// the call), with a fail-fast timeout per call. Not a follower when the leader is known: with authentication on and
// client certificates as identities, a follower forwards the call to the
// leader without the caller's identity, the leader refuses it ("auth: user
// name is empty"; etcd-io/etcd#20757 was fixed for tokens only) and the
// follower retries in a tight loop until the call times out. The first try
// is immediate; while etcd answers "not in sync" (or another passing error)
// it tries again after promotePause: the learner serving and etcd's own
// readiness rule (the learner within 10% of the leader) are the gates. Meanwhile it reads the
// learner's raft index every progressEvery, apart from the tries, and
// reports each increase to progress; a learner that does not answer yet
// (it serves clients only after publishing itself) reports nothing.
func (a *Admin) Promote(ctx context.Context, voters []string, id api.MemberID, learnerURL, leaderURL string, progress func(index uint64)) error {
	if len(voters) == 0 {
		return fmt.Errorf("etcdadmin: promote %s: no healthy voter to ask", id)
	}
	cli, err := a.promoteClient(voters, leaderURL)
	if err != nil {
		return err
	}
	if leaderURL == "" {
		defer cli.Close()
	}
	watch := a.watchProgress(ctx, learnerURL, progress)
	defer watch.stop()
	again, _ := ctx.Value(tryAgainKey{}).(<-chan struct{})
	start := time.Now()
	for {
		err = a.serves(ctx, learnerURL, id)
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, 2*a.health())
			_, err = cli.MemberPromote(clientv3.WithRequireLeader(cctx), uint64(id))
			cancel()
		}
		if err == nil {
			// The first reading is still reported: the caller journals
			// where the learner was when it was promoted.
			watch.stopAfterFirst()
			return nil
		}
		if !Retryable(err) {
			return fmt.Errorf("etcdadmin: promote %s: %w", id, err)
		}
		pause := time.NewTimer(promotePause(time.Since(start)))
		select {
		case <-ctx.Done():
			pause.Stop()
			watch.stop()
			return fmt.Errorf("etcdadmin: promote %s (learner at raft index %d): %w: %w", id, watch.last.Load(), err, ctx.Err())
		case <-pause.C:
		case <-again:
			pause.Stop()
		}
	}
}

type tryAgainKey struct{}

// TryAgainOn returns ctx for Promote, which then also tries again at once
// on every receive from again, besides after each pause: the caller's
// news that the learner may be in sync (its agent reporting its member
// ready, for one). etcd's readiness check stays the gate; a receive only
// brings the next try forward.
func TryAgainOn(ctx context.Context, again <-chan struct{}) context.Context {
	return context.WithValue(ctx, tryAgainKey{}, again)
}

// progressWatch reads a learner's raft index in the background while
// Promote tries.
type progressWatch struct {
	cancel context.CancelFunc
	first  chan struct{} // closed after the first reading
	wg     sync.WaitGroup
	last   atomic.Uint64
}

// watchProgress reads the learner's raft index at once and then every
// progressEvery until stopped, and reports each increase to progress
// (from its own goroutine; stop waits for it, so progress is not called
// after stop returns).
func (a *Admin) watchProgress(ctx context.Context, learnerURL string, progress func(uint64)) *progressWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &progressWatch{cancel: cancel, first: make(chan struct{})}
	if learnerURL == "" {
		close(w.first)
		return w
	}
	w.wg.Go(func() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for i := 0; ; i++ {
			if idx, ok := a.learnerIndex(ctx, learnerURL); ok && idx > w.last.Load() {
				w.last.Store(idx)
				if progress != nil {
					progress(idx)
				}
			}
			if i == 0 {
				close(w.first)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return w
}

// stopAfterFirst waits for the first reading (bounded by its probe
// timeout), then stops.
func (w *progressWatch) stopAfterFirst() {
	<-w.first
	w.stop()
}

// stop ends the watch and waits for it; it is idempotent.
func (w *progressWatch) stop() {
	w.cancel()
	w.wg.Wait()
}

// promoteClient is the leader's member client, or, when the leader is not
// known, a short-lived client of the voters that the caller closes.
func (a *Admin) promoteClient(voters []string, leaderURL string) (*clientv3.Client, error) {
	if leaderURL != "" {
		return a.members.get(leaderURL)
	}
	return a.dial(voters)
}

// learnerIndex reads the learner's raft index; ok is false when it does
// not answer quickly.
func (a *Admin) learnerIndex(ctx context.Context, learnerURL string) (uint64, bool) {
	sctx, cancel := context.WithTimeout(ctx, min(a.health(), 250*time.Millisecond))
	defer cancel()
	st, err := a.statusWithin(sctx, learnerURL)
	if err != nil {
		return 0, false
	}
	return st.RaftIndex, true
}

// ErrNotServing: the learner's status is not answered by the learner
// itself on its client URL within the health timeout. Promote does not
// promote it (a voter that does not serve counts against quorum) and
// tries again.
var ErrNotServing = errors.New("etcdadmin: the learner does not serve clients")

// serves checks that member id answers its status at url, itself, within
// the health timeout, with no alarm (as Observe's Healthy).
func (a *Admin) serves(ctx context.Context, url string, id api.MemberID) error {
	if url == "" {
		return fmt.Errorf("%w: %s has no client URL (it has not published itself)", ErrNotServing, id)
	}
	st, err := a.status(ctx, url)
	if err != nil {
		return fmt.Errorf("%w: %s at %s: %w", ErrNotServing, id, url, err)
	}
	if got := api.MemberID(st.Header.MemberId); got != id {
		return fmt.Errorf("%w: %s answered at %s, not %s", ErrNotServing, got, url, id)
	}
	if len(st.Errors) > 0 {
		// An alarm (NOSPACE refuses every write): not healthy, and no
		// change is made that the journal could not record.
		return fmt.Errorf("%w: %s reports %v", ErrNotServing, id, st.Errors)
	}
	return nil
}
