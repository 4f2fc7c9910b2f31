package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"time"

	"github.com/homystack/nico/agent/internal/kubeprobe"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/clusternix"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/store"
	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ComponentProbeConfig says where the component probes find the cluster's
// files on the machine; its zero value is the layout nico delivers
// (clusternix.DefaultPaths).
type ComponentProbeConfig struct {
	// Interval is the probes' tick; a cluster's spec.probes.interval
	// spaces the rounds (10s when zero).
	Interval time.Duration
	// ClusterCA is the cluster CA the API server's certificate is checked
	// with ("": clusternix.DefaultPaths().CACert).
	ClusterCA string
	// Kubeconfig holds the credential the leader leases are read with
	// ("": clusternix.DefaultPaths().Kubeconfig); without it, leases are
	// not checked. A cluster with spec.kubeconfig.path set (a
	// distribution's own kubeconfig; nico then delivers no admin.conf) is
	// read with that file instead.
	Kubeconfig string
	// URLs, by component (api.ComponentAPIServer, ...), override the
	// cluster's probe URLs on this machine (a machine whose components
	// listen elsewhere, several test machines on one host).
	URLs map[string]string
	// ReadFile reads those files (os.ReadFile when nil).
	ReadFile func(string) ([]byte, error)
}

// componentProber is the agent's component-probes controller: on a
// machine that is in the control plane of a KubernetesCluster (it holds
// the cluster's claim and is among status.controlPlane.machines), it
// probes the components the cluster's spec.probes names each interval (at
// each of its own ticks while a component is not healthy, so that one
// coming up is seen soon, and at once after this machine applied a new
// generation: a rollout's step waits for a report from after its switch)
// and writes the machine's ComponentReport when the round found something
// else than the report written, and otherwise every ReportRefresh; the
// report is bound to the heartbeat's lease, so it goes with the agent.
// Elsewhere it keeps no report, and reads nothing until its claim, a
// cluster or its configuration changes (the watches) or componentResync
// passes: only a machine in a control plane ticks (at
// ComponentProbeConfig.Interval, a timer on the agent's clock that wakes
// the controller).
//
//	claim + cluster + own configuration + heartbeat (watch, tick) --> control plane here? --no--> delete report
//	                                        | yes, interval elapsed, a generation applied or a new lease since
//	                                        v
//	                            probe each component --> changed, new lease or ReportRefresh elapsed? --yes--> write report
type componentProber struct {
	name     string // the node's
	now      func() time.Time
	clock    clockwork.Clock // times the tick
	tick     clockwork.Timer // armed while this machine is in a control plane
	wake     chan struct{}
	log      *slog.Logger
	store    func() *store.Store
	rec      *nodeRecord // the heartbeat's lease
	cfg      ComponentProbeConfig
	cluster  string
	lastAt   time.Time
	reported bool
	// healthy: every component was healthy in the last round; until then
	// rounds follow the agent's tick, then the cluster's interval.
	healthy bool
	// applied is the generation this machine had applied at the last
	// round.
	applied int64
	// written is the report last written, on lease.
	written *api.ComponentReportStatus
	lease   int64
}

// ReportRefresh is how often an agent rewrites a component report that
// has not changed; the report is fresh until ReportRefresh and three
// probe intervals after its round.
const ReportRefresh = 5 * time.Minute

// componentResync is the component-probes controller's safety-net tick:
// what it reads is watched, and a machine in a control plane ticks by its
// own timer.
const componentResync = time.Minute

func (a *Agent) componentProbes() controller.Controller { return a.componentProber().controller() }

func (a *Agent) componentProber() *componentProber {
	cfg := a.cfg.ComponentProbes
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.ClusterCA == "" {
		cfg.ClusterCA = clusternix.DefaultPaths().CACert
	}
	if cfg.Kubeconfig == "" {
		cfg.Kubeconfig = clusternix.DefaultPaths().Kubeconfig
	}
	if cfg.ReadFile == nil {
		cfg.ReadFile = os.ReadFile
	}
	return &componentProber{name: a.cfg.Name, now: func() time.Time { return a.Now() }, clock: a.cfg.Clock, wake: make(chan struct{}, 1),
		log: a.log, store: a.store, rec: &a.rec, cfg: cfg}
}

func (p *componentProber) controller() controller.Controller {
	return &controller.Func{ControllerName: "component-probes", Resync: componentResync, Wake: p.wake, Do: p.reconcile,
		Prefixes: []string{store.ClusterClaimKey(p.name), store.ClustersDir, store.NixosConfigKey(p.name),
			store.HeartbeatKey(p.name)}}
}

// reconcile probes once when due.
func (p *componentProber) reconcile(ctx context.Context) error {
	kc, err := p.myCluster(ctx)
	if err != nil {
		return fmt.Errorf("agent: component probes: %w", err)
	}
	p.ticking(kc != nil)
	key := store.ComponentReportKey(p.name)
	if kc == nil {
		if p.reported {
			if err := p.store().Delete(ctx, key); err != nil {
				return fmt.Errorf("agent: component probes: drop report: %w", err)
			}
			p.reported = false
		}
		p.cluster, p.written = "", nil
		return nil
	}
	now := p.now()
	probes := kc.Spec.Probes.WithDefaults()
	every := time.Duration(probes.Interval)
	if !p.healthy {
		every = min(every, p.cfg.Interval) // a component coming up is seen at the next tick
	}
	applied, err := p.appliedGeneration(ctx)
	if err != nil {
		return fmt.Errorf("agent: component probes: %w", err)
	}
	lease := p.rec.heartbeatLease()
	if p.cluster == kc.Metadata.Name && now.Sub(p.lastAt) < every && applied == p.applied && lease == p.lease {
		return nil
	}
	r := api.NewComponentReport(p.name)
	r.Status.Cluster = kc.Metadata.Name
	r.Status.Components = p.probe(ctx, kc)
	r.Status.CheckedAt = p.now().UTC()
	r.Status.FreshUntil = r.Status.CheckedAt.Add(ReportRefresh + 3*time.Duration(probes.Interval))
	p.healthy = !slices.ContainsFunc(r.Status.Components, func(h api.ComponentHealth) bool { return !h.Healthy })
	if w := p.written; w == nil || w.Cluster != r.Status.Cluster || applied != p.applied || lease != p.lease ||
		!slices.Equal(w.Components, r.Status.Components) || r.Status.CheckedAt.Sub(w.CheckedAt) >= ReportRefresh {
		if err := p.store().PutOnLease(ctx, r, clientv3.LeaseID(lease)); err != nil {
			p.written = nil
			return fmt.Errorf("agent: component probes: report: %w", err)
		}
		p.written = &r.Status
	}
	p.cluster, p.lastAt, p.reported, p.applied, p.lease = kc.Metadata.Name, now, true, applied, lease
	return nil
}

// ticking arms the tick (another reconcile one interval from now) while
// this machine is in a control plane, and stops it elsewhere.
func (p *componentProber) ticking(on bool) {
	switch {
	case !on && p.tick != nil:
		p.tick.Stop()
		p.tick = nil
	case on && p.tick == nil:
		p.tick = p.clock.AfterFunc(p.cfg.Interval, p.woken)
	case on:
		p.tick.Reset(p.cfg.Interval)
	}
}

// woken asks the runtime for a reconcile; one pending is enough.
func (p *componentProber) woken() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// appliedGeneration is the generation this machine's configuration says
// it applied (0: none).
func (p *componentProber) appliedGeneration(ctx context.Context) (int64, error) {
	c := api.NewNixosConfiguration(p.name)
	if err := p.store().Get(ctx, store.NixosConfigKey(p.name), c); errors.Is(err, store.ErrNotFound) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	return c.Status.AppliedGeneration, nil
}

// myCluster is the cluster whose control plane this machine is in, or nil.
func (p *componentProber) myCluster(ctx context.Context) (*api.KubernetesCluster, error) {
	me := p.name
	kv, err := p.store().GetKV(ctx, store.ClusterClaimKey(me))
	if errors.Is(err, store.ErrNotFound) || (err == nil && kv == nil) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	kc := &api.KubernetesCluster{}
	if err := p.store().Get(ctx, store.ClusterKey(string(kv.Value)), kc); errors.Is(err, store.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if kc.Deleting() || !slices.Contains(kc.Status.ControlPlane.Machines, me) {
		return nil, nil
	}
	return kc, nil
}

// probe probes every component of kc's spec.probes; a target that cannot
// be built (its CA file unreadable) reports every component unhealthy
// with the reason.
func (p *componentProber) probe(ctx context.Context, kc *api.KubernetesCluster) []api.ComponentHealth {
	targets, err := kubeprobe.Targets(kc.Spec.EffectiveProbes(), p.cfg.ClusterCA, p.cfg.ReadFile)
	for i := range targets {
		if u := p.cfg.URLs[targets[i].Name]; u != "" {
			targets[i].URL = u
		}
	}
	if err != nil {
		var out []api.ComponentHealth
		for _, name := range []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler} {
			out = append(out, api.ComponentHealth{Name: name, Message: err.Error()})
		}
		return out
	}
	probes := kc.Spec.Probes.WithDefaults()
	pr := &kubeprobe.Prober{Timeout: time.Duration(probes.Timeout), Identities: []string{p.name}}
	if h, err := os.Hostname(); err == nil && h != p.name {
		pr.Identities = append(pr.Identities, h)
	}
	kubeconfig := p.cfg.Kubeconfig
	if path := kc.Spec.Kubeconfig.Path; path != "" {
		kubeconfig = path
	}
	if data, err := p.cfg.ReadFile(kubeconfig); err != nil {
		p.log.Debug("leader leases not checked", "kubeconfig", kubeconfig, "err", err)
	} else {
		server, apiURL := "", probes.APIServer.URL
		if u := p.cfg.URLs[api.ComponentAPIServer]; u != "" {
			apiURL = u
		}
		if u, err := url.Parse(apiURL); err == nil && u.Host != "" {
			server = u.Scheme + "://" + u.Host
		}
		if l, err := kubeprobe.LeasesFromKubeconfig(data, server); err == nil {
			defer l.Close()
			pr.Leases = l
		} else {
			p.log.Debug("leader leases not checked", "kubeconfig", kubeconfig, "err", err)
		}
	}
	out := make([]api.ComponentHealth, 0, len(targets))
	for _, t := range targets {
		out = append(out, pr.Probe(ctx, t))
	}
	return out
}
