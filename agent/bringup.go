package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/etcdadmin"
)

// The bring-up takes a node from nothing to a registered node (a voter,
// on a control-plane machine) as controllers on the agent's runtime, one
// per phase. Each reconciles the node-local bringUp state: it waits for
// its inputs (the outputs of the phases before it), makes its output
// once, and wakes the phases that wait on it. A phase that has its inputs
// but cannot finish yet (a learner not yet promoted) reconciles again on
// its tick. Registration and the etcd join are tried again, after the
// runtime's backoff, after an etcd error that passes by itself (a timeout,
// a lost leader: etcdadmin.Transient); any other error of a phase ends the
// bring-up, and Run with it. The identity phase tries etcd's transient
// errors again itself (untilDone).
// The phases, their inputs and outputs are listed in bringUpPhases and in
// agent/controllers.go's table.

// output is one fact of the node-local bring-up state, made by one phase.
type output int

const (
	certsInPlace   output = iota // the node's certificates are on disk
	memberPrepared               // the local member runs, or is known to be joining
	storeConnected               // the store client is made
	identityMade                 // the node's etcd user and role (or the root identity) are in use
	nodeRegistered               // the node, its heartbeat and its join request are in the store
	memberJoined                 // the local member is in the cluster
	memberVoter                  // the local member is a voter, under the node's own identity
	leavesIssued                 // the member's certificates, issued alongside the join, are written
	numOutputs
)

var outputNames = [numOutputs]string{
	certsInPlace:   "certificates",
	memberPrepared: "member-prepared",
	storeConnected: "store-client",
	identityMade:   "etcd-identity",
	nodeRegistered: "registered",
	memberJoined:   "member-joined",
	memberVoter:    "voter",
	leavesIssued:   "leaves",
}

func (o output) String() string { return outputNames[o] }

// bringUpPhase is one phase of the bring-up: a controller that makes
// makes from needs.
type bringUpPhase struct {
	name  string
	needs []output
	makes output
	// tick is how often the phase reconciles while it has its inputs and
	// has not made its output; zero: only when woken.
	tick func(cfg *Config) time.Duration
	// do makes the output and reports whether it did; (false, nil): not
	// yet, again at the next tick.
	do func(b *bringUp, ctx context.Context) (bool, error)
	// retried: do is tried again after an etcd error that passes by
	// itself, rather than ending the bring-up; do must be safe to call
	// again after such an error.
	retried bool
}

// bringUpPhases are the bring-up's phases, in the order their outputs
// chain.
var bringUpPhases = []bringUpPhase{
	{name: "pki", makes: certsInPlace, do: (*bringUp).certificates},
	{name: "local-member", needs: []output{certsInPlace}, makes: memberPrepared, do: (*bringUp).localMember},
	{name: "store-connect", needs: []output{memberPrepared}, makes: storeConnected, do: (*bringUp).connect},
	{name: "etcd-identity", needs: []output{storeConnected}, makes: identityMade, do: (*bringUp).identity},
	{name: "registration", needs: []output{identityMade}, makes: nodeRegistered, do: (*bringUp).register, retried: true},
	{name: "etcd-join", needs: []output{nodeRegistered}, makes: memberJoined, do: (*bringUp).joinEtcd, retried: true},
	{name: "voter", needs: []output{memberJoined}, makes: memberVoter, do: (*bringUp).voter,
		tick: func(cfg *Config) time.Duration { return cfg.RetryInterval / 4 }},
	{name: "member-certs", needs: []output{memberVoter}, makes: leavesIssued, do: (*bringUp).leaves},
}

// bringUp is the node-local state of the bring-up and what its phases
// share. Fields a phase sets before it marks its output are read by the
// phases after it only (mark and has order them).
type bringUp struct {
	a *Agent
	// outer is Run's context: what a phase starts that outlives the
	// bring-up (the heartbeat, the renewal and gossip-key groups) runs
	// under it, not under the phase's own.
	outer context.Context
	bg    *groups
	hb    *heartbeat
	// hbCtx ends the heartbeat's first lease (firstLease).
	hbCtx context.Context

	// phases are bringUpPhases; tests give others.
	phases []bringUpPhase

	joining bool      // a control-plane node whose member is not running yet
	leased  bool      // the joining node's first heartbeat lease is granted
	view    *joinView // the join request registration filed or resumed
	keys    *group    // the gossip-key follower

	mu    sync.Mutex
	made  [numOutputs]bool
	hbg   *group // the heartbeat's group, once started
	wakes []chan struct{}
	done  func() // ends the bring-up's group, once the last output is made
}

// bringUpFailed carries a phase's error: it ends the bring-up's group
// (the runtime's fatal errors), and Run returns its cause.
type bringUpFailed struct {
	phase string
	err   error
}

func (e bringUpFailed) Error() string { return e.err.Error() }
func (e bringUpFailed) Unwrap() error { return e.err }

func isBringUpFailure(err error) bool { _, ok := errors.AsType[bringUpFailed](err); return ok }

// run runs the phases until the last output is made (nil), one fails
// (its error) or ctx ends (ctx's error).
func (b *bringUp) run(ctx context.Context) error {
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b.mu.Lock()
	b.done = cancel
	b.mu.Unlock()
	err := b.a.rt.Run(gctx, b.controllers()...)
	if f, ok := errors.AsType[bringUpFailed](err); ok {
		return f.err
	}
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !b.complete() {
		return errors.New("agent: bring-up stopped before the node was ready")
	}
	return nil
}

// phaseList is the phases the bring-up runs.
func (b *bringUp) phaseList() []bringUpPhase {
	if b.phases != nil {
		return b.phases
	}
	return bringUpPhases
}

// complete tells whether every phase made its output.
func (b *bringUp) complete() bool {
	for _, p := range b.phaseList() {
		if !b.has(p.makes) {
			return false
		}
	}
	return true
}

// controllers are the phases as controllers of the runtime.
func (b *bringUp) controllers() []controller.Controller {
	ctrls := make([]controller.Controller, 0, len(b.phaseList()))
	for _, p := range b.phaseList() {
		wake := make(chan struct{}, 1)
		b.wakes = append(b.wakes, wake)
		// Woken by every output made; the tick is a phase's poll, or
		// else an hour (the runtime wants one of a controller without
		// watches), at which a phase that waits finds nothing to do.
		tick := time.Hour
		if p.tick != nil {
			tick = p.tick(&b.a.cfg)
		}
		ctrls = append(ctrls, &controller.Func{
			ControllerName: p.name, Resync: tick, Wake: wake,
			// A phase may rightly run long: a join waits for the leader.
			Policy: controller.HealthPolicy{StallAfter: -1},
			Do:     b.reconciler(p),
		})
	}
	return ctrls
}

// reconciler is p's reconcile: nothing until its inputs are made or once
// its output is.
func (b *bringUp) reconciler(p bringUpPhase) func(context.Context) error {
	return func(ctx context.Context) error {
		if b.has(p.makes) {
			return nil
		}
		for _, in := range p.needs {
			if !b.has(in) {
				return nil
			}
		}
		ok, err := p.do(b, ctx)
		if err != nil && p.retried && ctx.Err() == nil && etcdadmin.Transient(err) {
			return err // the runtime tries again after its backoff
		}
		if err != nil {
			return bringUpFailed{phase: p.name, err: err}
		}
		if ok {
			b.mark(p.makes)
		}
		return nil
	}
}

// has tells whether o is made.
func (b *bringUp) has(o output) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.made[o]
}

// mark records o and wakes every phase; the last output ends the group.
func (b *bringUp) mark(o output) {
	b.mu.Lock()
	b.made[o] = true
	done := b.done
	b.mu.Unlock()
	b.a.log.Debug("bring-up", "made", o.String())
	if b.complete() && done != nil {
		done()
		return
	}
	for _, w := range b.wakes {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// heartbeatGroup is the heartbeat's group, nil before registration
// started it.
func (b *bringUp) heartbeatGroup() *group {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hbg
}

func (b *bringUp) startHeartbeat() {
	g := b.bg.start(b.outer, b.hb)
	b.mu.Lock()
	b.hbg = g
	b.mu.Unlock()
}

// certificates puts the node's certificates in place (obtained through
// the join endpoint, or issued from a CA it holds) and starts their
// renewal.
func (b *bringUp) certificates(ctx context.Context) (bool, error) {
	a := b.a
	if err := a.ensurePKI(ctx); err != nil {
		return false, err
	}
	if a.tls != nil {
		if c := a.certRenewal(); c != nil {
			b.bg.start(b.outer, c)
		}
	}
	return true, nil
}

// localMember starts the local member of a control-plane machine whose
// data dir holds one (or bootstraps the cluster); one that has none is
// joining. A joining machine holding the root certificate joins under
// the root identity (etcdIdentity.useRoot).
func (b *bringUp) localMember(ctx context.Context) (bool, error) {
	a := b.a
	if !a.controlPlane() {
		return true, nil
	}
	if err := a.member.prepare(ctx); err != nil {
		return false, err
	}
	b.joining = !a.state.memberRunning()
	if id := a.identity(); b.joining && !a.cfg.Bootstrap && id.holdsRoot() {
		if err := id.useRoot(); err != nil {
			return false, err
		}
	}
	return true, nil
}

// connect makes the store client.
func (b *bringUp) connect(ctx context.Context) (bool, error) {
	return true, b.a.connect(ctx)
}

// identity makes the node's etcd identity and starts the gossip-key
// follower, which reads the store under it.
func (b *bringUp) identity(ctx context.Context) (bool, error) {
	a := b.a
	id := a.identity()
	if err := untilDone(ctx, identityRetry(), id.warning, transientOnly(id.ensure)); err != nil {
		return false, err
	}
	if c := a.gossip.keys(); c != nil {
		b.keys = b.bg.start(b.outer, c)
	}
	return true, nil
}

// register writes the node and, on a joining machine, its join request.
// The leader acts on a join only once the node, its heartbeat and its
// request are all in: a joining node grants its first lease before it
// registers and writes its heartbeat in the transaction that files the
// request (registerAndRequest), one revision and one pass of the leader,
// where a heartbeat written apart wakes a pass that finds no request yet
// and holds up the one that does. Its heartbeat controller starts after,
// finding its key written; on other nodes it starts before the node
// registers.
func (b *bringUp) register(ctx context.Context) (bool, error) {
	a := b.a
	switch {
	case b.joining && !b.leased:
		if err := a.firstLease(b.hbCtx, b.hb); err != nil {
			return false, err
		}
		b.leased = true
	case !b.joining && b.heartbeatGroup() == nil:
		b.startHeartbeat()
	}
	v, err := a.etcdJoin.registerAndRequest(ctx, b.joining)
	if err != nil {
		return false, err
	}
	b.view = v
	if b.heartbeatGroup() == nil {
		b.startHeartbeat()
	}
	return true, nil
}

// joinEtcd follows a joining machine's join request until its member is
// a voter (etcdJoin.run).
func (b *bringUp) joinEtcd(ctx context.Context) (bool, error) {
	if !b.joining {
		return true, nil
	}
	v := b.view
	b.view = nil // tried again, it reads the request anew
	return true, b.a.etcdJoin.run(ctx, v)
}

// voter waits until the local member of a control-plane machine is a
// voter (a restarted learner is promoted by the leader: it follows its
// join request again), then makes the part of its etcd identity left for
// after the join and restarts the gossip-key follower on the new client.
func (b *bringUp) voter(ctx context.Context) (bool, error) {
	a := b.a
	if !a.controlPlane() {
		return true, nil
	}
	_, _, learner, err := a.member.self(ctx)
	switch {
	case errors.Is(err, errNoMember):
		return false, a.removal.removed(ctx, fmt.Sprintf("the cluster has no member at %s", a.cfg.PeerURL))
	case err != nil:
		return false, nil // again at the next tick
	case learner:
		if err := a.etcdJoin.run(ctx, nil); err != nil {
			return false, err
		}
		return b.voter(ctx) // a voter now: read it so
	}
	switched := a.root.inUse.Load()
	id := a.identity()
	if err := untilDone(ctx, identityRetry(), id.warning, id.finish); err != nil {
		return false, err
	}
	if switched && b.keys != nil {
		// Its follower holds the store it was made with.
		b.keys.stop()
		b.keys = b.bg.start(b.outer, a.gossip.keys())
	}
	return true, nil
}

// leaves waits for the member's certificates issued alongside the join (a
// standby starts no member).
func (b *bringUp) leaves(ctx context.Context) (bool, error) {
	return true, b.a.leaves.wait(ctx)
}

// readyPhase is the node phase a brought-up node shows.
func (a *Agent) readyPhase() api.NodePhase {
	if a.controlPlane() {
		return api.NodeMember
	}
	return api.NodeRegistered
}
