package coordinator

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeplan"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// clusterFleet is what the cluster controller reads, at one revision.
type clusterFleet struct {
	clusters []*api.KubernetesCluster // oldest first: the older cluster claims first
	nodes    map[string]*api.Node
	machines map[string]*api.Machine
	alive    map[string]bool
	claims   map[string]string // machine -> cluster
	configs  map[string]*api.NixosConfiguration
	rollouts []*api.Rollout // oldest first
	reports  map[string]*api.ComponentReport
	drains   map[string]*api.DrainRequest // by machine
	// kubeconfigs are the distributions' kubeconfig reports, by cluster.
	kubeconfigs map[string]*api.KubeconfigReport
	// members are etcd's members, read once per pass.
	members []membership.Member
	// machineClaims are the MachineClaims (the planes' asks of pools, and
	// others').
	machineClaims []*api.MachineClaim
	// live is the leader's liveness record of the nodes;
	// replaceDeadAfter is the EtcdCluster's replaceDeadMembersAfter (zero:
	// a dead VM is never replaced).
	live             map[string]api.NodeLiveness
	replaceDeadAfter time.Duration
	// addrs are the machines' addresses and bases the candidates, each
	// worked out once per read (addresses, candidates): every cluster's
	// selection asks for every machine's.
	addrs map[string][]string
	bases []fleetCandidate
}

// deadSince is when the liveness record saw machine die (zero: not dead).
func (f *clusterFleet) deadSince(machine string) time.Time {
	if l, ok := f.live[machine]; ok && l.State == string(membership.LiveDead) {
		return l.Since
	}
	return time.Time{}
}

// replace tells whether machine is a VM a claim asked for that is dead
// past replaceDeadMembersAfter: its plane lets it go and the claim asks
// for a fresh one.
func (f *clusterFleet) replace(machine string, now time.Time) bool {
	dead := f.deadSince(machine)
	return f.claimOf(machine) != "" && f.replaceDeadAfter > 0 && !dead.IsZero() && now.Sub(dead) >= f.replaceDeadAfter
}

// claimOf is the machine's MachineClaim ("" none).
func (f *clusterFleet) claimOf(machine string) string {
	if m := f.machines[machine]; m != nil {
		return m.Spec.Claim
	}
	return ""
}

// noClusterWork tells whether the cluster controller has nothing to do:
// no KubernetesCluster, and no MachineClaim owned by one (orphanClaims
// releases those). Read before the rest, it spares a fleet without
// Kubernetes clusters the read of every node and configuration on each
// change to them (a rollout's every step and every agent's report).
func noClusterWork(ctx context.Context, st *store.Store) (bool, error) {
	v, err := st.View(ctx, store.DirKeys(store.ClustersDir), store.Dir(store.ClaimsDir))
	if err != nil {
		return false, fmt.Errorf("read: %w", err)
	}
	if len(v.KVs(store.DirKeys(store.ClustersDir))) > 0 {
		return false, nil
	}
	claims, err := store.ViewObjects[api.MachineClaim](v, store.ClaimsDir)
	if err != nil {
		return false, err
	}
	for _, cl := range claims {
		for _, o := range cl.Metadata.OwnerReferences {
			if o.Kind == api.KindKubernetesCluster {
				return false, nil
			}
		}
	}
	return true, nil
}

// readClusterFleet reads every input of the cluster controller at one
// revision.
func readClusterFleet(ctx context.Context, st *store.Store) (*clusterFleet, error) {
	v, err := st.View(ctx,
		store.Dir(store.ClustersDir),
		store.Dir(store.NodesDir),
		store.Dir(store.MachinesDir),
		store.DirKeys(store.HeartbeatsDir),
		store.Dir(store.ClusterClaimsDir),
		store.Dir(store.NixosConfigsDir),
		store.Dir(store.RolloutsDir),
		store.Dir(store.ComponentReportsDir),
		store.Dir(store.DrainRequestsDir),
		store.Dir(store.KubeconfigReportsDir),
		store.Dir(store.ClaimsDir),
		store.Key(store.LivenessKey),
		store.Key(store.EtcdClusterKey),
	)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	f := &clusterFleet{nodes: map[string]*api.Node{}, machines: map[string]*api.Machine{}, claims: map[string]string{},
		configs: map[string]*api.NixosConfiguration{}, reports: map[string]*api.ComponentReport{}, drains: map[string]*api.DrainRequest{},
		kubeconfigs: map[string]*api.KubeconfigReport{}}
	if f.clusters, err = store.ViewObjects[api.KubernetesCluster](v, store.ClustersDir); err != nil {
		return nil, err
	}
	slices.SortStableFunc(f.clusters, func(a, b *api.KubernetesCluster) int {
		if c := a.Metadata.CreatedAt.Compare(b.Metadata.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Metadata.Name, b.Metadata.Name)
	})
	if err := index(v.KVs(store.Dir(store.NodesDir)), f.nodes); err != nil {
		return nil, err
	}
	if err := index(v.KVs(store.Dir(store.MachinesDir)), f.machines); err != nil {
		return nil, err
	}
	f.alive = v.Names(store.DirKeys(store.HeartbeatsDir))
	for _, kv := range v.KVs(store.Dir(store.ClusterClaimsDir)) {
		f.claims[store.Name(string(kv.Key))] = string(kv.Value)
	}
	if err := index(v.KVs(store.Dir(store.NixosConfigsDir)), f.configs); err != nil {
		return nil, err
	}
	if f.rollouts, err = store.ViewObjects[api.Rollout](v, store.RolloutsDir); err != nil {
		return nil, err
	}
	slices.SortStableFunc(f.rollouts, func(a, b *api.Rollout) int {
		if c := a.Metadata.CreatedAt.Compare(b.Metadata.CreatedAt); c != 0 {
			return c
		}
		return rolloutSeq(a.Metadata.Name) - rolloutSeq(b.Metadata.Name)
	})
	if err := index(v.KVs(store.Dir(store.ComponentReportsDir)), f.reports); err != nil {
		return nil, err
	}
	if err := index(v.KVs(store.Dir(store.DrainRequestsDir)), f.drains); err != nil {
		return nil, err
	}
	if err := index(v.KVs(store.Dir(store.KubeconfigReportsDir)), f.kubeconfigs); err != nil {
		return nil, err
	}
	if f.machineClaims, err = store.ViewObjects[api.MachineClaim](v, store.ClaimsDir); err != nil {
		return nil, err
	}
	lv := new(api.Liveness)
	if ok, err := v.Decode(store.LivenessKey, lv); err != nil {
		return nil, err
	} else if ok {
		f.live = lv.Status.Nodes
	}
	ec := new(api.EtcdCluster)
	if ok, err := v.Decode(store.EtcdClusterKey, ec); err != nil {
		return nil, err
	} else if ok {
		f.replaceDeadAfter = time.Duration(ec.Spec.Policy.ReplaceDeadMembersAfter)
	}
	return f, nil
}

// index decodes kvs into m by object name.
func index[T any, PT interface {
	*T
	api.Object
}](kvs []*mvccpb.KeyValue, m map[string]PT) error {
	objs, err := store.Objects[T, PT](kvs)
	if err != nil {
		return err
	}
	for _, o := range objs {
		m[o.GetMetadata().Name] = o
	}
	return nil
}

// candidates are the fleet's machines as cluster's selection sees them: the
// registered nodes (labels from the node) and the machines of pools whose
// node has not registered yet. What no cluster changes during a pass is
// worked out once (fleetCandidates); each cluster's adds who holds each
// machine now (claims change as the clusters before it claim), whether
// its configuration is another's and whether it is to be replaced.
func (f *clusterFleet) candidates(cluster string, now time.Time) []kubeplan.Machine {
	if f.bases == nil {
		f.bases = f.fleetCandidates()
	}
	out := make([]kubeplan.Machine, len(f.bases))
	for i := range f.bases {
		b := &f.bases[i]
		m := b.Machine
		m.ClaimedBy = f.claims[m.Name]
		if b.node {
			m.HasConfiguration = b.cfg != nil && !kubeplan.OwnedBy(b.cfg.Metadata.OwnerReferences, cluster)
			// Only a machine a claim asked for is ever replaced.
			m.Replace = m.Claim != "" && f.replace(m.Name, now)
		}
		out[i] = m
	}
	return out
}

// fleetCandidate is a machine as every cluster's selection sees it in one
// pass; node: a registered node's (cfg its configuration), else a pool's
// machine not registered yet.
type fleetCandidate struct {
	kubeplan.Machine
	node bool
	cfg  *api.NixosConfiguration
}

// fleetCandidates are the candidates' fields no cluster changes in a pass.
func (f *clusterFleet) fleetCandidates() []fleetCandidate {
	out := make([]fleetCandidate, 0, len(f.nodes)+len(f.machines))
	for name, n := range f.nodes {
		if n.Status.Phase == api.NodeRemoved {
			continue
		}
		out = append(out, fleetCandidate{node: true, cfg: f.configs[name],
			Machine: kubeplan.Machine{Name: name, Labels: n.Spec.Labels, Discoverable: f.alive[name], Claim: f.claimOf(name), Addresses: f.addresses(name)}})
	}
	for name, m := range f.machines {
		if n := f.nodes[name]; n == nil || n.Status.Phase == api.NodeRemoved {
			out = append(out, fleetCandidate{Machine: kubeplan.Machine{Name: name, HasConfiguration: m.Status.HasConfiguration, Claim: m.Spec.Claim, Addresses: m.Status.Addresses}})
		}
	}
	return out
}

// addresses are machine's addresses: its Machine's, else the hosts of its
// node's etcd and gossip URLs. The slice is the fleet's, shared by every
// caller: read it, do not change it.
func (f *clusterFleet) addresses(machine string) []string {
	if as, ok := f.addrs[machine]; ok {
		return as
	}
	as := f.readAddresses(machine)
	if f.addrs == nil {
		f.addrs = map[string][]string{}
	}
	f.addrs[machine] = as
	return as
}

func (f *clusterFleet) readAddresses(machine string) []string {
	if m := f.machines[machine]; m != nil && len(m.Status.Addresses) > 0 {
		return slices.Clone(m.Status.Addresses)
	}
	n := f.nodes[machine]
	if n == nil {
		return nil
	}
	var out []string
	for _, u := range []string{n.Spec.PeerURL, n.Spec.ClientURL} {
		if p, err := url.Parse(u); err == nil && p.Hostname() != "" {
			out = append(out, p.Hostname())
		}
	}
	if h, _, err := net.SplitHostPort(n.Status.GossipAddr); err == nil && h != "" {
		out = append(out, h)
	}
	return slices.Compact(out)
}

// owned are cluster's rollouts, oldest first.
func (f *clusterFleet) owned(cluster string) []*api.Rollout {
	var out []*api.Rollout
	for _, r := range f.rollouts {
		if kubeplan.OwnedBy(r.Metadata.OwnerReferences, cluster) {
			out = append(out, r)
		}
	}
	return out
}

// claimedBy are the machines cluster holds, sorted.
func (f *clusterFleet) claimedBy(cluster string) []string {
	var out []string
	for m, c := range f.claims {
		if c == cluster {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

// facts are what kubeplan.Judge reads of cluster kc.
func (cc *clusterController) facts(kc *api.KubernetesCluster, sel kubeplan.Selection, f *clusterFleet, members []membership.Member) kubeplan.Facts {
	fa := kubeplan.Facts{Selection: sel}
	fa.EtcdReady, fa.EtcdMessage = etcdReady(kc, members)
	// The probes the agents run: an external component is probed at its
	// URL whatever spec.probes says of its on-machine probe.
	probes := kc.Spec.EffectiveProbes().WithDefaults()
	now := cc.now()
	for _, m := range sel.ControlPlane {
		mem := kubeplan.Member{Name: m, Applied: runsCluster(f.configs[m], kc.Metadata.Name)}
		r := f.reports[m]
		fresh := r.Fresh(kc.Metadata.Name, now, time.Duration(probes.Interval))
		probe := func(p *api.ComponentProbe, component string) kubeplan.Probe {
			if !fresh {
				return kubeplan.Probe{}
			}
			h := r.Component(component)
			if h == nil {
				return kubeplan.Probe{}
			}
			return kubeplan.Probe{Reported: true, Healthy: h.Healthy, Leader: h.HoldsLease, Message: h.Message}
		}
		mem.APIServer = probe(probes.APIServer, api.ComponentAPIServer)
		if probes.APIServer.Disabled {
			mem.APIServer = kubeplan.Probe{Reported: true, Healthy: mem.Applied, Message: "not probed"}
		}
		mem.ControllerManager = probe(probes.ControllerManager, api.ComponentControllerManager)
		if probes.ControllerManager.Disabled {
			mem.ControllerManager = kubeplan.Probe{Reported: true, Healthy: mem.APIServer.Healthy, Message: "not probed"}
		}
		mem.Scheduler = probe(probes.Scheduler, api.ComponentScheduler)
		if probes.Scheduler.Disabled {
			mem.Scheduler = kubeplan.Probe{Reported: true, Healthy: mem.APIServer.Healthy, Message: "not probed"}
		}
		fa.ControlPlane = append(fa.ControlPlane, mem)
	}
	for _, m := range sel.DataPlane {
		fa.DataPlane = append(fa.DataPlane, kubeplan.Member{Name: m, Applied: runsCluster(f.configs[m], kc.Metadata.Name)})
	}
	return fa
}

// runsCluster tells whether a machine with configuration cfg runs one of
// cluster's configurations (an earlier one too, while a rollout is under
// way), not its release.
func runsCluster(cfg *api.NixosConfiguration, cluster string) bool {
	return cfg != nil && kubeplan.OwnedBy(cfg.Metadata.OwnerReferences, cluster) && cfg.Status.AppliedGeneration > 0 &&
		cfg.Spec.Flake != kubeplan.OnRemoveFlake
}

// etcdReady judges the cluster's datastore. The fleet's etcd (provider
// nico) is ready when it has a leader and every voter is healthy; an
// external or the distribution's datastore is judged by the API servers'
// /readyz, which checks it.
func etcdReady(kc *api.KubernetesCluster, members []membership.Member) (bool, string) {
	if p := kc.Spec.Etcd.ProviderOrDefault(); p != api.EtcdProviderNico {
		return true, fmt.Sprintf("etcd provider %s: checked by the API servers' /readyz", p)
	}
	var voters, healthy int
	leader := ""
	var sick []string
	for _, m := range members {
		if m.Learner {
			continue
		}
		voters++
		if m.Healthy {
			healthy++
		} else {
			sick = append(sick, etcdMemberName(m))
		}
		if m.Leader {
			leader = etcdMemberName(m)
		}
	}
	switch {
	case voters == 0:
		return false, "the fleet's etcd has no voter"
	case leader == "":
		return false, "the fleet's etcd has no leader"
	case len(sick) > 0:
		return false, fmt.Sprintf("%d of %d etcd voters healthy; unhealthy: %s", healthy, voters, strings.Join(sick, ", "))
	}
	where := "prefix " + api.ClusterEtcdPrefix(kc.Metadata.Name)
	if kc.Spec.Etcd.Namespace {
		where = "namespace " + api.ClusterEtcdNamespace(kc.Metadata.Name)
	}
	return true, fmt.Sprintf("%d of %d etcd voters healthy, leader %s, %s", healthy, voters, leader, where)
}

func etcdMemberName(m membership.Member) string {
	switch {
	case m.Node != "":
		return m.Node
	case m.Name != "":
		return m.Name
	}
	return m.ID.String()
}
