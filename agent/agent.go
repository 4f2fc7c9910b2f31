// Package agent is the node lifecycle of nico's per-machine agent, and
// only that. It owns its machine and nothing else: it gets and renews the
// machine's certificates, registers the node under a heartbeat lease, runs
// the local etcd member when the node has the control-plane role
// (bootstrapping a new cluster, or joining a running one through the
// coordinator's learner flow), applies the node's generations, and reports
// what it observed. It never decides for the fleet.
//
// What else a machine runs lives next to it, each in a package of its own:
// the join endpoint a control-plane machine serves as the coordinator's
// identity, and the client a machine enrolls with a join token and renews
// through (agent/joinendpoint, pkg/enroll), and a hypervisor host's domain controller
// (agent/hypervisor). The agent's main (agent/cmd/nico-agent) runs the
// endpoint beside the agent, gives the agent the endpoint's client as its
// ObtainCerts and RenewNodeCert, and on a hypervisor host a
// hypervisor.Setup, whose controller the agent runs in its node group.
//
//	start --bootstrap, no data--> [new cluster] ----------------------------+
//	  |                                                                      v
//	  +--data of a current member--> [restart member] -------------> [registered, member serving]
//	  |                                                                      ^
//	  +--no data / stale data (wiped)--> [join request] --learner added--> [start learner] --promoted--+
//	                                          ^                                 |
//	                                          +------ join failed: wipe, retry -+
//
// The bring-up runs as controllers, one per phase (agent/bringup.go; the
// table in agent/controllers.go); the ready node's controllers follow.
package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/homystack/nico/agent/hypervisor"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/failpoint"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/metrics"
	"github.com/homystack/nico/pkg/store"
	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrRemoved is returned by Run when this node was removed from the cluster;
// its member's data was wiped and it will not rejoin by itself.
var ErrRemoved = errors.New("agent: node removed from the cluster")

// ErrStandby is returned by Run when the leader removed this node's member
// to make it a standby (spec.voters was lowered): the data is wiped and
// the machine kept; the agent must be started again, and then waits as a
// standby (agent/standby.go).
var ErrStandby = errors.New("agent: member removed to make this node a standby; start the agent again")

// Config is what the agent needs to know about its machine.
type Config struct {
	Name      string
	Roles     []api.Role
	Bootstrap bool
	// Labels are the machine's labels in its Node (api.LabelTopology: its
	// failure domain, over which the leader spreads etcd voters).
	Labels map[string]string
	// DataDir is the etcd member's data dir.
	DataDir      string
	PeerURL      string
	ClientURL    string
	ClusterToken string
	// Endpoints are client URLs of the running cluster (not needed to
	// bootstrap).
	Endpoints    []string
	DialTimeout  time.Duration
	Prefix       string
	HeartbeatTTL time.Duration
	// RetryInterval paces re-reads and retries while joining.
	RetryInterval time.Duration
	Version       string
	// Gossip is the mesh (agent/gossip.go); with no Endpoints the agent
	// learns them from it. nil: no gossip.
	Gossip Gossip
	// Applier applies the node's desired NixOS generation (agent/generation.go);
	// nil: the agent does not manage generations.
	Applier apply.Applier
	// HostFiles, when set, is the Applier's host-file writer: the agent
	// re-syncs the applied generation's host files when the machine's
	// projected secrets change (agent/generation.go).
	HostFiles *apply.HostFiles
	// Hypervisor, on a host with the hypervisor role, runs the libvirt
	// domains placed on it (package agent/hypervisor); nil: none.
	Hypervisor *hypervisor.Setup
	// PKI is where the machine's certificates live (agent/pki.go).
	PKI PKIConfig
	// AgentPathFile names a file that holds the path of the nico-agent
	// the running generation installed; after applying a generation that
	// changes it, Run returns ErrUpgraded (agent/upgrade.go). Empty: never.
	AgentPathFile string
	// EndpointsCache is a file in which the agent keeps the etcd client
	// URLs it last reached (agent/endpoints_cache.go); empty: none.
	EndpointsCache string
	// DiscoverGrace is how long discovery waits for the mesh before it
	// uses the cached endpoints; 0: DefaultDiscoverGrace.
	DiscoverGrace time.Duration
	// Reloader, when set, restarts the agent when its configuration file
	// or binary changed (agent/reload.go); it runs once the node is ready.
	Reloader *Reloader
	// DataDirInterval is how often the free space of the etcd data dir's
	// file system is measured (agent/datadir_space.go); zero:
	// DefaultDataDirInterval.
	DataDirInterval time.Duration
	// Clock times the agent's controllers (agent/controllers.go); nil:
	// the real clock.
	Clock clockwork.Clock
	// Metrics, when set, counts the generations applied and rolled back
	// (package metrics).
	Metrics *metrics.Agent
	// ComponentProbes says where the Kubernetes component probes find the
	// cluster's files (agent/componentprobes.go).
	ComponentProbes ComponentProbeConfig
	// Drain says how a control-plane agent runs the drain hooks of its
	// clusters (agent/drain.go).
	Drain DrainConfig
	// KubeconfigPublish says how a control-plane agent publishes a
	// distribution's own kubeconfig (agent/kubeconfig_publish.go).
	KubeconfigPublish KubeconfigPublishConfig
	// SwitchGuard says how a control-plane agent gives back the switch
	// slot its host's pre-switch check took (agent/switchrelease.go).
	SwitchGuard SwitchGuardConfig
	// OnConnect, when set, is given the store each time the agent has
	// connected to etcd (nico-agent binds its applier's secret source,
	// the machine's projected secrets, to it).
	OnConnect func(st *store.Store)
}

// Notifier tells the service manager how the agent is doing.
type Notifier interface {
	Ready() error
	Status(msg string) error
	Stopping() error
}

// Agent runs one machine's part of nico. It composes the components that
// do the work, each with the dependencies it uses, and the controllers
// that run them (agent/controllers.go):
//
//	component     file               does
//	localMember   member.go          the etcd member: data dir at start, start, stop, wipe
//	nodeWriter    node_record.go     the node's object: registration, phase changes
//	etcdJoin      join.go            the way into the etcd cluster: join request, learner, standby
//	supervision   supervise.go       restarts a crashed member, follows the wanted etcd version
//	removal       removal.go         the way out: wipe, record removed, release the machine
//	gossipState   gossip.go          the node's metadata in the mesh, the mesh's keys
//	machinePKI    pki.go             the machine's certificates and their renewal
//	etcdIdentity  identity.go        the etcd user and role the agent connects as
//	bringUp       bringup.go         the bring-up phases, as controllers
type Agent struct {
	cfg     Config
	runtime member.Runtime
	notify  Notifier
	log     *slog.Logger
	// Now is the clock; tests replace it.
	Now func() time.Time
	// ObtainCerts, when set, gets the machine's certificates through the
	// join endpoint when pki.dir lacks them (agent/pki.go).
	ObtainCerts ObtainCertsFunc
	// RenewInterval is how often certificates are checked for renewal.
	RenewInterval time.Duration
	// RenewNodeCert, when set, renews the node certificate of a machine
	// without ca.key through the join endpoint (agent/renew_node.go).
	RenewNodeCert RenewNodeCertFunc
	// Executable is the running agent's binary (os.Executable); tests
	// replace it.
	Executable func() (string, error)

	rt  *controller.Runtime // the agent's controllers (agent/controllers.go)
	tls *tls.Config         // client identity from pki.dir; nil without one
	// leaves: the member's leaves issued alongside the join (issueLeaves).
	leaves memberLeaves
	// conn is the store client and its store, set by connect and, on a
	// machine that joined under its root identity, replaced by its node
	// identity's once a voter (etcdIdentity.switchToNode); read through
	// client and store by every goroutine.
	conn  atomic.Pointer[connection]
	root  rootIdentity // a joining control-plane machine's (agent/identity.go)
	rec   nodeRecord   // the node's object and its heartbeat's lease
	state nodeState    // up, standby, the local member running (agent/node_state.go)
	// stopHeartbeat stops the heartbeat and waits for its lease's revoke;
	// idempotent.
	stopHeartbeat func()
	gossip        *gossipState // its part in the gossip mesh (agent/gossip.go)
	// supervisor wakes the member supervisor and asks it for the agent's
	// upgrade (agent/supervise.go).
	supervisor  supervisorSignal
	etcd        memberRun       // the etcd version and quota wanted and run (agent/etcd_version.go)
	endpoints   *endpointsCache // the endpoints last reached (agent/endpoints_cache.go)
	member      *localMember    // the local etcd member (agent/member.go)
	node        *nodeWriter     // writes the node's object (agent/node_record.go)
	etcdJoin    *etcdJoin       // the node's way into the etcd cluster (agent/join.go)
	supervision *supervision    // keeps the member running (agent/supervise.go)
	removal     *removal        // the way out of the cluster (agent/removal.go)
}

// connection is a store client and the store over it.
type connection struct {
	cli *clientv3.Client
	st  *store.Store
}

// client is the store client (nil before connect).
func (a *Agent) client() *clientv3.Client {
	if c := a.conn.Load(); c != nil {
		return c.cli
	}
	return nil
}

// store is the store over client (nil before connect).
func (a *Agent) store() *store.Store {
	if c := a.conn.Load(); c != nil {
		return c.st
	}
	return nil
}

// use makes cli and st the agent's store client and store.
func (a *Agent) use(cli *clientv3.Client, st *store.Store) {
	a.conn.Store(&connection{cli: cli, st: st})
}

// New returns an agent; it starts nothing until Run.
func New(cfg Config, runtime member.Runtime, notify Notifier, log *slog.Logger) *Agent {
	if cfg.Prefix == "" {
		cfg.Prefix = store.DefaultPrefix
	}
	if cfg.HeartbeatTTL <= 0 {
		cfg.HeartbeatTTL = 10 * time.Second
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = 2 * time.Second
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.DiscoverGrace <= 0 {
		cfg.DiscoverGrace = DefaultDiscoverGrace
	}
	if cfg.Clock == nil {
		// A test-only hook: a failpoints build may step it (tests/faults).
		cfg.Clock = failpoint.Clock(clockwork.NewRealClock())
	}
	a := &Agent{cfg: cfg, runtime: runtime, notify: notify, log: log.With("component", "agent", "node", cfg.Name), Now: cfg.Clock.Now, RenewInterval: time.Hour, Executable: os.Executable, supervisor: supervisorSignal{woken: make(chan struct{}, 1)}}
	a.endpoints = &endpointsCache{path: cfg.EndpointsCache, log: a.log}
	a.etcd.wantQuota.Store(-1)
	// The components read the clock through Now, which tests replace.
	now := func() time.Time { return a.Now() }
	a.member = &localMember{cfg: &a.cfg, runtime: runtime, state: &a.state, run: &a.etcd, leaves: &a.leaves, endpoints: a.endpoints, log: a.log,
		now: now, client: a.client, tls: a.memberTLS,
		dial: func(eps []string) (*clientv3.Client, error) { return a.etcdClient(eps, 0) }}
	a.node = &nodeWriter{cfg: &a.cfg, rec: &a.rec, state: &a.state, member: a.member, store: a.store, log: a.log, now: now}
	a.removal = &removal{cfg: &a.cfg, log: a.log, now: now, state: &a.state, rec: &a.rec, member: a.member, node: a.node,
		endpoints: a.endpoints, store: a.store, client: a.client, release: func(ctx context.Context) { a.generationRunner().release(ctx) },
		stopHeartbeat: func() {
			if a.stopHeartbeat != nil {
				a.stopHeartbeat()
			}
		}}
	a.etcdJoin = &etcdJoin{cfg: &a.cfg, log: a.log, now: now, store: a.store, client: a.client,
		member: a.member, node: a.node, state: &a.state, removal: a.removal, host: a}
	a.supervision = &supervision{cfg: &a.cfg, log: a.log, state: &a.state, member: a.member, node: a.node, rec: &a.rec, signal: &a.supervisor, store: a.store}
	a.gossip = &gossipState{cfg: &a.cfg, state: &a.state, endpoints: a.endpoints, store: a.store, log: a.log, now: now}
	a.rt = a.newRuntime()
	return a
}

// Healthy tells whether the node is registered and, on a control-plane
// node, its member is serving or it waits as a standby, and every running
// controller of the agent is healthy (controller.Runtime.Healthy). The
// watchdog pings only while it holds.
func (a *Agent) Healthy() bool { return a.state.ready() && a.rt.Healthy() }

func (a *Agent) controlPlane() bool { return a.cfg.controlPlane() }

// controlPlane tells whether the machine has the control-plane role.
func (c Config) controlPlane() bool { return slices.Contains(c.Roles, api.RoleControlPlane) }

// Run brings the node into the fleet and keeps it there until ctx ends.
func (a *Agent) Run(ctx context.Context) (err error) {
	defer func() {
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			// Stopped, not failed: whichever phase the end of ctx cut
			// short (awaiting the learner add or the promotion, the
			// identity retried after the join) returned its error.
			// nico-agent exited 1 for a stop there.
			err = nil
		}
		a.shutdown(err)
	}()
	a.status("starting")
	defer a.leaves.written()
	bg := &groups{rt: a.rt}
	defer bg.stop()
	// The heartbeat runs in a group of its own: it outlives the node's
	// controllers on a removal, until the removal is recorded.
	hbCtx, hbCancel := context.WithCancel(ctx)
	b := &bringUp{a: a, outer: ctx, bg: bg, hb: a.newHeartbeat(), hbCtx: hbCtx}
	a.stopHeartbeat = func() {
		if g := b.heartbeatGroup(); g != nil {
			g.stop()
		}
		hbCancel()
		b.hb.wait()
	}
	defer a.stopHeartbeat()
	if err := b.run(ctx); err != nil {
		return err
	}
	a.state.setUp(true)
	a.node.setPhase(ctx, a.readyPhase(), "")
	a.gossip.publish()
	defer a.gossip.learnPeers()()
	_ = a.notify.Ready()
	a.status("ready")
	a.log.Info("node ready", "controlPlane", a.controlPlane())
	var reload controller.Controller
	if a.cfg.Reloader != nil {
		reload = a.cfg.Reloader.Controller(a)
	}
	var gens controller.Controller
	if a.cfg.Applier != nil {
		gens = a.generations()
	}
	var ev controller.Controller
	if a.controlPlane() {
		ev = a.supervision.versionWatch()
	}
	var quota, dataDir controller.Controller
	if a.controlPlane() {
		quota, dataDir = a.quotaWatch(), a.dataDirWatch()
	}
	return a.supervise(ctx, b.heartbeatGroup(), nonNil(a.gossip.refresh(), a.nodeCertPublish(), gens, a.hypervisorController(), reload, ev, quota, dataDir, a.componentProbes(), a.drains(), a.kubeconfigPublish(), a.switchRelease()))
}

// connect makes the store client: the configured endpoints plus the local
// member, kept in sync with the member list.
func (a *Agent) connect(ctx context.Context) error {
	eps := slices.Clone(a.cfg.Endpoints)
	if len(eps) == 0 && !a.state.memberRunning() && a.cfg.Gossip != nil {
		var err error
		if eps, err = a.discover(ctx); err != nil {
			return err
		}
	}
	if a.state.memberRunning() && !slices.Contains(eps, a.cfg.ClientURL) {
		eps = append([]string{a.cfg.ClientURL}, eps...)
	}
	if len(eps) == 0 {
		return errors.New("agent: no etcd endpoint: set etcd.endpoints, or bootstrap")
	}
	cli, err := a.etcdClient(eps, 5*time.Second)
	if err != nil {
		return fmt.Errorf("agent: connect %v: %w", eps, err)
	}
	// The connection (its TLS handshake) is made now, while the identity
	// is ensured over another, rather than at the first call.
	cli.ActiveConnection().Connect()
	st, err := store.New(cli, a.cfg.Prefix)
	if err != nil {
		cli.Close()
		return err
	}
	a.use(cli, st)
	a.endpoints.save(eps, a.Now())
	if a.cfg.OnConnect != nil {
		a.cfg.OnConnect(st)
	}
	return nil
}

func (a *Agent) status(msg string) { _ = a.notify.Status(msg) }

// shutdown stops the member and drops the heartbeat so others see the node
// go at once.
func (a *Agent) shutdown(runErr error) {
	_ = a.notify.Stopping()
	a.state.setUp(false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.member.stop(ctx); err != nil {
		a.log.Warn("stop member", "err", err)
	}
	if a.client() != nil {
		a.client().Close()
	}
	if a.root.retired != nil {
		a.root.retired.Close()
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		a.log.Info("agent stopped", "err", runErr)
	}
}
