package agent

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/controller"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Everything the agent does runs as controllers on one runtime (package
// controller). The bring-up (agent/bringup.go) runs first, as one group:
// each phase reconciles the node-local bring-up state, making its output
// once its inputs are made, and the group ends once every output is:
//
//	phase          needs            makes            tick
//	pki            -                certificates     -
//	local-member   certificates     member-prepared  -
//	store-connect  member-prepared  store-client     -
//	etcd-identity  store-client     etcd-identity    -
//	registration   etcd-identity    registered       -
//	etcd-join      registered       member-joined    -
//	voter          member-joined    voter            RetryInterval/4
//	member-certs   voter            leaves           -
//
// registration and etcd-join try again, after the runtime's backoff, an
// etcd error that passes by itself; any other phase error ends the
// bring-up. Its phases start the groups below that outlive it: pki the renewal,
// etcd-identity the gossip-key follower, registration the heartbeat. The
// rest start once the node is ready, and every group stops in reverse
// order of its start:
//
//	controller          group      watches (store)   tick
//	cert-renewal        pki        -                 caCheckInterval (ca.key machines)
//	node-cert-renewal   pki        -                 RenewInterval (machines without ca.key)
//	gossip-keys         keys       gossip-key        gossipKeyResync
//	heartbeat           heartbeat  heartbeats/<node> heartbeatResync
//	join-progress       join       -                 JoinProgressInterval (while joining, under systemd)
//	gossip-refresh      node       -                 GossipRefreshInterval
//	node-cert-publish   node       -                 nodeCertCheckInterval
//	member              node       - (wakes: supervisorSignal) memberCheckInterval
//	generations         node       nixosconfigs/<node> generationResync (with an Applier)
//	hypervisor          node       machines/ nodes/  hypervisor.Config.Resync (hypervisor role; wakes: a held-back machine due)
//	removal             node       removals/<node>   removalResync
//	component-probes    node       clusterclaims/<node> clusters/ nixosconfigs/<node> heartbeats/<node>  componentResync (wakes: ComponentProbes.Interval in a control plane; probes a KubernetesCluster's components; at once after a switch)
//	reload              node       -                 ReloadWatch.Interval (Config.Reloader)
//	switch-release      node       switches/<node>   SwitchGuard.Resync (control plane: ends a granted switch)
//	join-endpoint       join       -                 Config.Poll (agent/joinendpoint: keeps it serving, again on a CA change or a failure)
//	token-prune         join       -                 TokenPruneInterval (agent/joinendpoint, while it serves)
//
// A controller's health (last success, last error, restarts) feeds
// Healthy, and so the service manager's watchdog: a controller failing for
// about a minute in a row (agentBackoff, agentMaxFailures) makes the agent
// unhealthy, and the watchdog restarts it.

// agentMaxFailures is how many failed reconciles in a row make an agent
// controller unhealthy: with agentBackoff, about a minute of failures, so
// that a store outage of a few seconds does not restart the agent.
const agentMaxFailures = 8

// agentBackoff is the agent controllers' retry policy.
func agentBackoff() backoff.BackOff {
	return &backoff.ExponentialBackOff{InitialInterval: 200 * time.Millisecond, RandomizationFactor: 0.3, Multiplier: 2, MaxInterval: 30 * time.Second}
}

// newRuntime is the agent's controller runtime over its store client (set
// by connect, before any controller that watches starts).
func (a *Agent) newRuntime() *controller.Runtime {
	return controller.New(agentSource{a.client},
		controller.WithClock(a.cfg.Clock),
		controller.WithLogger(a.log),
		controller.WithBackoff(agentBackoff),
		controller.WithHealthPolicy(agentMaxFailures, 5*time.Minute),
		controller.WithFatal(func(err error) bool { return isExit(err) || isBringUpFailure(err) }))
}

// Runtime is the agent's controller runtime; other parts of the process
// (the join endpoint) run their controllers on it, so that their health
// feeds Healthy.
func (a *Agent) Runtime() *controller.Runtime { return a.rt }

// Health returns the record of each of the agent's controllers that ran.
func (a *Agent) Health() []controller.Health { return a.rt.Health() }

// exitError ends the group that returned it, and Run with err (ErrUpgraded,
// or a removal) after the group stopped.
type exitError struct {
	err error
	why string // of a removal
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

func isExit(err error) bool { _, ok := errors.AsType[exitError](err); return ok }

// agentSource is the runtime's view of the agent's store client.
type agentSource struct{ client func() *clientv3.Client }

var errNotConnected = errors.New("agent: not connected to the store yet")

func (s agentSource) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if s.client() == nil {
		return nil, errNotConnected
	}
	return s.client().Get(ctx, key, opts...)
}

func (s agentSource) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	if s.client() == nil {
		ch := make(chan clientv3.WatchResponse)
		close(ch)
		return ch
	}
	return s.client().Watch(ctx, key, opts...)
}

// groups runs groups of controllers in the background on the agent's
// runtime; stop ends them in reverse order of their start.
type groups struct {
	rt *controller.Runtime
	mu sync.Mutex
	gs []*group
}

// group is one background Runtime.Run.
type group struct {
	cancel context.CancelFunc
	once   sync.Once
	done   chan struct{}
	err    error // Run's, once done is closed
}

// stop ends the group and waits for it; it is idempotent.
func (g *group) stop() {
	g.once.Do(g.cancel)
	<-g.done
}

// start runs ctrls as one group until ctx ends or stop.
func (gs *groups) start(ctx context.Context, ctrls ...controller.Controller) *group {
	ctx, cancel := context.WithCancel(ctx)
	g := &group{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		g.err = gs.rt.Run(ctx, ctrls...)
	}()
	gs.mu.Lock()
	gs.gs = append(gs.gs, g)
	gs.mu.Unlock()
	return g
}

// stop ends every group, the last started first.
func (gs *groups) stop() {
	gs.mu.Lock()
	all := slices.Clone(gs.gs)
	gs.mu.Unlock()
	for _, g := range slices.Backward(all) {
		g.stop()
	}
}

// nonNil is ctrls without the nil ones (a controller the agent's
// configuration leaves out).
func nonNil(ctrls ...controller.Controller) []controller.Controller {
	return slices.DeleteFunc(ctrls, func(c controller.Controller) bool { return c == nil })
}
