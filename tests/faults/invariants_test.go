package faults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// watcher samples etcd's member list, each voter's status and nico's
// journal every sampleEvery and records each breach of the design's
// invariants:
//   - at most one membership change in flight (running operations),
//   - at most one learner,
//   - never below quorum: of the voters, those that answer plus those the
//     harness is faulting on purpose are a majority (a minority that lasts
//     belowQuorumFor),
//   - the etcd leader never removed while leading: a member that leaves the
//     list was not the leader at the previous sample,
//   - no voter counted toward quorum that has not answered for longer than
//     the health timeout: every voter the harness is not faulting has
//     answered its status, itself, within healthTimeout (plus one sample)
//     of when each sample asked it; a sample asks every member at once,
//     each within healthTimeout, as the coordinators do. A member is
//     timed from the first sample that lists it, learner or voter, so a
//     learner promoted before it serves is a breach as soon as it is a
//     voter past that bound. A member whose fault ended is allowed
//     recoverFor to serve again.
//
// Sampling misses what happens between two samples; etcd itself refuses
// most of these (a second learner, a removal below quorum), so a breach
// here is one nico made etcd accept.
type watcher struct {
	cli     *clientv3.Client
	st      *store.Store
	faulted func() map[string]bool

	mu         sync.Mutex
	violations []string
	lastLeader uint64
	lastIDs    map[uint64]string

	belowSince    time.Time // the first sample below quorum of a run of them
	belowReported bool

	// answered is when each member (by ID) last answered its status
	// itself, was faulted on purpose, or was first listed; silent holds
	// the voters already reported as not serving.
	answered map[uint64]time.Time
	silent   map[uint64]bool
	// wasFaulted holds the members faulted at the last sample;
	// recovering, the members whose fault has ended and that have not
	// answered since. A member the harness paused or cut off catches up
	// before it serves again (a paused leader steps down and learns the
	// new term): etcd's time, not a voter nico counted, so it is allowed
	// recoverFor rather than the health timeout.
	wasFaulted, recovering map[uint64]bool
}

// recoverFor is how long a member whose fault ended may stay silent.
const recoverFor = 15 * time.Second

// healthTimeout is the coordinators' coordinator.healthTimeout (its
// default): a member whose status is not answered within it is unhealthy.
const healthTimeout = 2 * time.Second

// belowQuorumFor is how long the voters that answer must stay a minority
// to count as a breach: a busy member may miss one status call.
const belowQuorumFor = 3 * time.Second

const sampleEvery = 200 * time.Millisecond

// newWatcher samples through cli (unscoped) and st.
func newWatcher(cli *clientv3.Client, st *store.Store, faulted func() map[string]bool) *watcher {
	return &watcher{cli: cli, st: st, faulted: faulted, answered: map[uint64]time.Time{}, silent: map[uint64]bool{},
		wasFaulted: map[uint64]bool{}, recovering: map[uint64]bool{}}
}

// run samples until ctx ends.
func (w *watcher) run(ctx context.Context) {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			w.sample(ctx)
		}
	}
}

func (w *watcher) breach(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

// Violations returns every breach seen so far.
func (w *watcher) Violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.violations...)
}

func (w *watcher) sample(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := w.cli.MemberList(sctx)
	if err != nil {
		return // no quorum reachable from the test: nothing to judge
	}
	learners, voters, answering := 0, 0, 0
	var leader uint64
	ids := map[uint64]string{}
	faulted := w.faulted()
	asked, answers := time.Now(), w.askAll(ctx, resp.Members)
	var silent []string
	for i, m := range resp.Members {
		ids[m.ID] = m.Name
		if _, ok := w.answered[m.ID]; !ok || faulted[m.Name] {
			w.answered[m.ID] = asked
		}
		switch {
		case faulted[m.Name]:
			w.wasFaulted[m.ID] = true
		case w.wasFaulted[m.ID]:
			delete(w.wasFaulted, m.ID)
			w.recovering[m.ID] = true
		}
		ok := answers[i].ok
		if ok {
			w.answered[m.ID] = answers[i].at
			delete(w.recovering, m.ID)
			if answers[i].leader != 0 {
				leader = answers[i].leader
			}
		}
		bound := healthTimeout + sampleEvery
		if w.recovering[m.ID] {
			bound = recoverFor
		}
		if m.IsLearner {
			learners++
			continue
		}
		voters++
		switch {
		case faulted[m.Name] || ok:
			answering++
		case asked.Sub(w.answered[m.ID]) > bound && !w.silent[m.ID]:
			w.silent[m.ID] = true
			after := ""
			if w.recovering[m.ID] {
				after = " since its fault ended"
			}
			silent = append(silent, fmt.Sprintf("%s (%s) is a voter and had not answered for %s when asked", m.Name, api.MemberID(m.ID), asked.Sub(w.answered[m.ID]).Round(time.Millisecond))+after)
		}
	}
	for _, v := range silent {
		w.breach("%s (health timeout %s)", v, healthTimeout)
	}
	if learners > 1 {
		w.breach("%d learners", learners)
	}
	switch {
	case answering >= voters/2+1:
		w.belowSince = time.Time{}
	case w.belowSince.IsZero():
		w.belowSince = time.Now()
	case time.Since(w.belowSince) >= belowQuorumFor && !w.belowReported:
		w.belowReported = true
		w.breach("below quorum for %s: %d of %d voters answer or are faulted", belowQuorumFor, answering, voters)
	}
	ops, _, err := store.List[api.Operation](sctx, w.st, store.OpsDir)
	if err != nil {
		return
	}
	w.mu.Lock()
	for id, name := range w.lastIDs {
		if _, ok := ids[id]; !ok && id == w.lastLeader && !movedAway(ops, api.MemberID(id)) {
			w.violations = append(w.violations, fmt.Sprintf("%s etcd leader %s (%s) removed while leading", time.Now().Format("15:04:05.000"), name, api.MemberID(id)))
		}
	}
	w.lastIDs, w.lastLeader = ids, leader
	w.mu.Unlock()
	running := 0
	for _, op := range ops {
		if op.Status.Phase == api.OpRunning {
			running++
		}
	}
	if running > 1 {
		w.breach("%d operations running at once", running)
	}
}

// movedAway tells whether a removal journaled moving etcd leadership away
// from id (between two samples the leader may move and then be removed).
func movedAway(ops []*api.Operation, id api.MemberID) bool {
	for _, op := range ops {
		for _, e := range op.Status.History {
			if strings.HasPrefix(e.Message, "moved etcd leadership from "+id.String()+" ") {
				return true
			}
		}
	}
	return false
}

// answer is what one member said to a status request: ok when the member
// itself answered (at when, with the leader it knows).
type answer struct {
	ok     bool
	at     time.Time
	leader uint64
}

// askAll asks every member's status at once, each within healthTimeout
// (the coordinators' own bound), and returns the answers in members'
// order. At once: asked one after the other, a member that does not
// answer would delay the others' requests past the bound.
func (w *watcher) askAll(ctx context.Context, members []*etcdserverpb.Member) []answer {
	out := make([]answer, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() { out[i] = w.ask(ctx, m.ID, m.ClientURLs) })
	}
	wg.Wait()
	return out
}

// ask asks member id's status at its first client URL. A member with no
// client URL has not published itself: it serves nobody.
func (w *watcher) ask(ctx context.Context, id uint64, urls []string) answer {
	if len(urls) == 0 {
		return answer{}
	}
	cctx, cancel := context.WithTimeout(ctx, healthTimeout)
	st, err := w.cli.Status(cctx, urls[0])
	cancel()
	if err != nil || st.Header.MemberId != id {
		return answer{}
	}
	return answer{ok: true, at: time.Now(), leader: st.Leader}
}
