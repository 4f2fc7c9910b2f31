package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The agent tells the service manager it is ready only once its member is
// a voter, and a join that copies a large store takes longer than a unit's
// start timeout (TimeoutStartSec=, 90 s by default). So while a join makes
// progress the agent asks for more start time (EXTEND_TIMEOUT_USEC); a join
// that stalls for JoinStallAfter stops asking, and the service manager
// times the start out JoinExtendBy after the last ask.
//
//	join starts --ask--> [sample at once, then every JoinProgressInterval] --changed or stalled < JoinStallAfter--> ask
//	                                   |
//	                                   +--no change for JoinStallAfter--> no ask (logged once; asks again on change)
const (
	// JoinProgressInterval is how often the join's progress is sampled.
	JoinProgressInterval = 10 * time.Second
	// JoinExtendBy is how much more start time each ask is for: a few
	// intervals, so one slow sample does not end the start.
	JoinExtendBy = 45 * time.Second
	// JoinStallAfter is how long a join may show no progress before the
	// agent stops asking: longer than the coordinator's default learner
	// start and progress timeouts (2 min each), after which it fails the
	// join and the agent files a new one, which is progress again.
	JoinStallAfter = 5 * time.Minute
)

// TimeoutExtender is a Notifier that can ask the service manager for more
// time (*sdnotify.Notifier).
type TimeoutExtender interface {
	ExtendTimeout(d time.Duration) error
}

// joinMark is what a join's progress is read from: any change is progress.
type joinMark struct {
	joins   int64  // the highest mod revision of the join requests (this node's and those queued before it)
	ops     int64  // the highest mod revision of the operation journal (the leader's steps)
	applied uint64 // the local member's raft applied index (a learner catching up)
}

// progressWatch asks extend for extendBy more time at each pass, as long
// as sample changed within stallAfter of it.
type progressWatch struct {
	extend     TimeoutExtender
	sample     func(context.Context) (joinMark, error)
	now        func() time.Time
	extendBy   time.Duration
	stallAfter time.Duration
	log        *slog.Logger

	last    joinMark
	have    bool      // last was sampled
	stalled bool      // the stall was logged
	lastAt  time.Time // when the mark last changed (or the watch began)
}

// pass samples the join once and asks for more time unless it stalled.
// A failed sample is no progress, and no error: the join's own steps
// report their failures.
func (p *progressWatch) pass(ctx context.Context) error {
	m, err := p.sample(ctx)
	now := p.now()
	if err == nil && (!p.have || m != p.last) {
		if p.stalled {
			p.log.Info("the join makes progress again; asking the service manager for more start time")
		}
		p.last, p.have, p.lastAt, p.stalled = m, true, now, false
	}
	if now.Sub(p.lastAt) < p.stallAfter {
		p.ask()
		return nil
	}
	if !p.stalled {
		p.stalled = true
		p.log.Warn("the join has made no progress; no more start time asked for, the service manager may time the start out", "for", now.Sub(p.lastAt).Round(time.Second), "lastErr", err)
	}
	return nil
}

func (p *progressWatch) ask() {
	if err := p.extend.ExtendTimeout(p.extendBy); err != nil {
		p.log.Debug("asking for more start time", "err", err)
	}
}

// extendWhileJoining runs the join-progress controller (tick-only, every
// JoinProgressInterval: its inputs are several prefixes and the local
// member, and only their change over time counts) until stop is called:
// it asks the service manager for more start time while the join makes
// progress. It does nothing when the agent's Notifier cannot ask (outside
// systemd).
func (a *Agent) extendWhileJoining(ctx context.Context) (stop func()) {
	ext, ok := a.notify.(TimeoutExtender)
	if on, can := a.notify.(interface{ Enabled() bool }); !ok || (can && !on.Enabled()) || a.client() == nil {
		return func() {}
	}
	p := &progressWatch{extend: ext, sample: joinSampler(a.store(), a.client(), a.cfg.ClientURL), now: a.Now, lastAt: a.Now(),
		extendBy: JoinExtendBy, stallAfter: JoinStallAfter, log: a.log}
	p.ask() // the join starts: progress, asked for before its first step
	g := (&groups{rt: a.rt}).start(ctx, &controller.Func{ControllerName: "join-progress", Resync: JoinProgressInterval, Do: p.pass})
	return g.stop
}

// joinSampler reads a join's progress through st (the last changes of the
// join requests and the journal) and the local member at clientURL, which
// may not run yet, through cli.
func joinSampler(st *store.Store, cli *clientv3.Client, clientURL string) func(context.Context) (joinMark, error) {
	latest := st.LastChange
	return func(ctx context.Context) (joinMark, error) {
		ctx, cancel := context.WithTimeout(ctx, JoinProgressInterval/2)
		defer cancel()
		var m joinMark
		var err error
		if m.joins, err = latest(ctx, store.JoinsDir); err != nil {
			return m, err
		}
		if m.ops, err = latest(ctx, store.OpsDir); err != nil {
			return m, err
		}
		if st, err := cli.Status(ctx, clientURL); err == nil {
			m.applied = st.RaftAppliedIndex
		}
		return m, nil
	}
}
