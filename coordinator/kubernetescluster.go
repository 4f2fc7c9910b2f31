package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeplan"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
)

// ClusterHooks are the cluster controller's side effects that other
// packages own: the PKI and etcd identity. Their zero value runs clusters
// with no secrets delivered. (A cluster's spec.drain runs through the
// agents: kubernetescluster_drain.go.)
type ClusterHooks struct {
	// DefaultGitRepo is the repository of a cluster whose spec names none.
	DefaultGitRepo string
	// Secrets makes and removes a cluster's secrets; nil: none.
	Secrets ClusterSecrets
	// API reaches each cluster's own API server once it is ready: it
	// registers the bootstrap token, reads the Nodes the cluster's
	// readiness is judged by and deletes released machines' Nodes. nil:
	// no token is registered and machines count as ready once they run
	// the cluster's configuration.
	API ClusterAPI
	// Nodes reaches each cluster's Nodes for its rollouts: with it, a
	// cluster's rollout cordons and drains each worker before its switch
	// and waits for its Node Ready after (api.RolloutKubernetes). nil:
	// workers roll without.
	Nodes ClusterNodes
}

// ClusterSecrets are a cluster's PKI, tokens, machine keys and etcd
// identity (user, role, prefix), written fenced on the leader's term.
type ClusterSecrets interface {
	// Ensure creates what is missing for the cluster's machines (and
	// renews what is due) and returns each machine's host files (secrets
	// by reference), the values already readable by that machine.
	Ensure(ctx context.Context, fence store.Fence, c *api.KubernetesCluster, m SecretsRequest) (map[string][]api.HostFile, error)
	// Kubeconfig writes the admin kubeconfig for server (once the control
	// plane is ready) and returns the secret's name.
	Kubeconfig(ctx context.Context, fence store.Fence, c *api.KubernetesCluster, server string) (string, error)
	// Released drops what machines, no longer in the cluster, were given.
	Released(ctx context.Context, fence store.Fence, c *api.KubernetesCluster, machines []string) error
	// Delete removes every secret of the cluster, its etcd user and role
	// and the data under its prefix.
	Delete(ctx context.Context, fence store.Fence, c *api.KubernetesCluster) error
}

// SecretsRequest is what a cluster's secrets are made for.
type SecretsRequest struct {
	// Endpoint is the control-plane endpoint, host:port.
	Endpoint string
	// ControlPlane and DataPlane are the machines, in the selection's order.
	ControlPlane, DataPlane []string
	// Addresses are each machine's addresses (the API servers' serving
	// certificate names the control plane's).
	Addresses map[string][]string
}

// clusterController is the leader's Kubernetes cluster controller
// (controllers.go): for each KubernetesCluster it selects and claims
// machines, plans with package kubeplan and writes the cluster's Rollout
// (never a NixosConfiguration: the rollout controller writes those), its
// claims and its status, each fenced on leadership.
//
//	[event or resync] --> read fleet --> per cluster (oldest first):
//	    select --> claim (txn: claim absent) --> secrets --> kubeplan.Judge, Next
//	    --> write Rollout | release | unclaim --> status (CAS, observedGeneration)
//	    deleting and nothing held --> delete secrets, rollouts, the cluster
type clusterController struct {
	st *store.Store
	// members lists etcd's members (MemberAdmin.Observe).
	members func(context.Context) ([]membership.Member, error)
	fence   store.Fence
	now     func() time.Time
	logger  *slog.Logger
	// hooks are Config.Clusters.
	hooks *ClusterHooks
	snaps *snapshotter
	last  map[string]string // cluster -> last logged plan
}

// newClusterController returns the Kubernetes cluster controller of the
// term of d.
func newClusterController(d leaderDeps, hooks *ClusterHooks, snaps *snapshotter) *clusterController {
	return &clusterController{st: d.st, members: d.admin.Observe, fence: d.fence, now: d.now, logger: d.log,
		hooks: hooks, snaps: snaps, last: map[string]string{}}
}

// reconcile is the controller's Reconcile: one pass over every cluster.
// A cluster's error does not stop the others; a lost leadership does.
func (cc *clusterController) reconcile(ctx context.Context) error {
	if idle, err := noClusterWork(ctx, cc.st); err != nil || idle {
		if err != nil {
			return fmt.Errorf("kubernetes clusters: %w", err)
		}
		return nil
	}
	f, err := readClusterFleet(ctx, cc.st)
	if err != nil {
		return fmt.Errorf("kubernetes clusters: %w", err)
	}
	if err := cc.orphanClaims(ctx, f); err != nil {
		return fmt.Errorf("kubernetes clusters: machine claims: %w", err)
	}
	if len(f.clusters) == 0 {
		return nil
	}
	if f.members, err = cc.members(ctx); err != nil {
		return fmt.Errorf("kubernetes clusters: etcd members: %w", err)
	}
	var errs []error
	for _, kc := range f.clusters {
		if err := cc.pass(ctx, f, kc); err != nil {
			if errors.Is(err, store.ErrNotLeader) {
				return err
			}
			errs = append(errs, fmt.Errorf("kubernetes cluster %s: %w", kc.Metadata.Name, err))
		}
	}
	return errors.Join(errs...)
}

// pass converges one cluster.
func (cc *clusterController) pass(ctx context.Context, f *clusterFleet, kc *api.KubernetesCluster) error {
	name := kc.Metadata.Name
	deleting := kc.Deleting()
	var sel kubeplan.Selection
	if !deleting {
		sel = kubeplan.Select(name, group(name, api.PlaneControl, kc.Spec.ControlPlane.MachineSet), group(name, api.PlaneData, kc.Spec.DataPlane.MachineSet), f.candidates(name, cc.now()))
		var err error
		if sel, err = cc.claim(ctx, f, kc, sel); err != nil {
			return err
		}
	}
	if err := cc.planeClaims(ctx, f, kc, sel); err != nil {
		return fmt.Errorf("machine claims: %w", err)
	}
	members := f.members
	endpoint := clusterEndpoint(kc, sel, f)
	// Nothing rolls until the whole control plane is selected and every
	// named machine exists: cluster.nix names every control-plane node.
	cpComplete := len(sel.ControlPlane) > 0 && sel.MissingControlPlane == 0 && len(sel.Unknown) == 0 && endpoint != "" &&
		!slices.ContainsFunc(sel.Held, func(m string) bool { return slices.Contains(kc.Spec.ControlPlane.Machines, m) })
	var nix string
	var nixErr error
	var files map[string][]api.HostFile
	if cpComplete && !deleting {
		nix, nixErr = renderClusterNix(kc, sel, f, members, endpoint)
		if s := cc.hooks.Secrets; s != nil && nixErr == nil {
			req := SecretsRequest{Endpoint: endpoint, ControlPlane: sel.ControlPlane, DataPlane: sel.DataPlane, Addresses: map[string][]string{}}
			for _, m := range sel.All() {
				req.Addresses[m] = f.addresses(m)
			}
			var err error
			if files, err = s.Ensure(ctx, cc.fence, kc, req); err != nil {
				return fmt.Errorf("secrets: %w", err)
			}
		}
	}

	rf := kubeplan.RollFacts{Current: map[string]*api.NixosConfigurationSpec{}, Release: map[string]api.NixosConfigurationSpec{},
		Rollouts: f.owned(name), Drain: kc.Spec.Drain != nil, Down: map[string]bool{}}
	for m, cfg := range f.configs {
		rf.Current[m] = &cfg.Spec
	}
	selected := map[string]bool{}
	for _, m := range sel.All() {
		selected[m] = true
		if n := f.nodes[m]; n != nil && n.Status.Phase != api.NodeRemoved && !f.alive[m] {
			rf.Down[m] = true
		}
	}
	for _, m := range f.claimedBy(name) {
		if selected[m] {
			continue
		}
		rf.Release[m] = kubeplan.ReleaseSpec(kc, cc.hooks.DefaultGitRepo)
		if n := f.nodes[m]; n == nil || n.Status.Phase == api.NodeRemoved || f.replace(m, cc.now()) {
			// Gone from the fleet, or a dead VM being replaced (its domain
			// goes with its claim): nothing to roll onto, only the claim
			// to drop.
			delete(rf.Current, m)
		}
	}
	if cpComplete && nixErr == nil && !deleting {
		for _, m := range sel.All() {
			if n := f.nodes[m]; n == nil || n.Status.Phase == api.NodeRemoved {
				continue // rolled once its agent has registered it
			}
			spec := kubeplan.MachineSpec(kubeplan.SpecInput{Cluster: kc, DefaultGitRepo: cc.hooks.DefaultGitRepo, ClusterNix: nix, HostFiles: files[m]}, m)
			rf.Desired = append(rf.Desired, kubeplan.Want{Machine: m, ControlPlane: slices.Contains(sel.ControlPlane, m), Spec: spec})
		}
	}
	rf.VersionChange = kc.Spec.Version != "" && kc.Status.Version != "" && kc.Spec.Version != kc.Status.Version

	facts := cc.facts(kc, sel, f, members)
	facts.Deleting = deleting
	judged := kubeplan.Judge(facts)
	apiReady := judged.Condition(kubeplan.APIServerReady).Status
	var bootErr error
	if a := cc.hooks.API; a != nil && !deleting {
		if bootErr = cc.observeAPI(ctx, a, kc, apiReady, &facts); errors.Is(bootErr, store.ErrNotLeader) {
			return bootErr
		}
		judged = kubeplan.Judge(facts)
	}
	rf.APIServerReady = judged.Condition(kubeplan.APIServerReady).Status
	plan := kubeplan.Next(rf)
	if plan.Action == kubeplan.Halted {
		facts.Halted = plan.Reason
		judged = kubeplan.Judge(facts)
	}
	if nixErr != nil && judged.Phase != kubeplan.Failed && !deleting {
		judged.Phase, judged.Message = kubeplan.Failed, "cluster.nix: "+nixErr.Error()
	}
	if err := cc.dropDrains(ctx, kc, rf.Release, f); err != nil {
		return err
	}
	var drained *kubeplan.Condition
	if plan.Action == kubeplan.Release && plan.Drain {
		var cond kubeplan.Condition
		var err error
		if plan, cond, err = cc.drain(ctx, kc, plan, f); err != nil {
			return err
		}
		drained = &cond
		if len(plan.Machines) == 0 {
			plan = kubeplan.RollPlan{Action: kubeplan.Wait, Reason: cond.Reason + ": " + cond.Message}
		}
	}
	cc.log(name, plan)
	if a := cc.hooks.API; a != nil && plan.Action == kubeplan.Unclaim && apiReady && !deleting {
		// A released machine's kubelet has stopped (its release applied):
		// its Node goes before its claim.
		for _, m := range plan.Machines {
			if err := a.DeleteNode(ctx, cc.fence, kc, m); err != nil {
				return fmt.Errorf("delete the Node of released machine %s: %w", m, err)
			}
			cc.logger.Info("node deleted", "cluster", name, "machine", m)
		}
	}
	if err := cc.applyPlan(ctx, kc, plan, f); err != nil {
		return err
	}
	if deleting && plan.Action == kubeplan.None && len(f.claimedBy(name)) == 0 {
		return cc.finishDeletion(ctx, kc, f)
	}
	// In sync: every selected machine runs the cluster's configuration.
	inSync := plan.Action == kubeplan.None && !deleting && cpComplete && nixErr == nil && sel.Missing() == 0 && len(rf.Desired) == len(sel.All())
	var kubeconfig string
	var published *kubeplan.Condition
	cpReady := !deleting && judged.Condition(kubeplan.ControlPlaneReady).Status
	if s := cc.hooks.Secrets; s != nil && cpReady && kc.Spec.Kubeconfig.Path == "" {
		var err error
		if kubeconfig, err = s.Kubeconfig(ctx, cc.fence, kc, "https://"+endpoint); err != nil {
			return fmt.Errorf("kubeconfig: %w", err)
		}
	}
	if cpReady && kc.Spec.Kubeconfig.Path != "" {
		var c kubeplan.Condition
		kubeconfig, c = distributionKubeconfig(kc, f.kubeconfigs[name])
		published = &c
	}
	if err := cc.writeStatus(ctx, kc, statusUpdate{judged: judged, sel: sel, endpoint: endpoint, kubeconfig: kubeconfig,
		rollouts: f.owned(name), inSync: inSync, facts: facts, drained: drained, idle: plan.Action == kubeplan.None, published: published}); err != nil {
		return err
	}
	return bootErr
}

// observeAPI reaches kc's own API server once its API servers are ready:
// it registers the bootstrap token (an error is returned, after the
// status is written, and the runtime retries with backoff) and reads the
// Nodes into facts (an error names itself in the data plane's condition).
func (cc *clusterController) observeAPI(ctx context.Context, a ClusterAPI, kc *api.KubernetesCluster, apiReady bool, facts *kubeplan.Facts) error {
	facts.NodesObserved = true
	if !apiReady {
		facts.NodesError = "the API servers are not ready"
		return nil
	}
	var bootErr error
	if err := a.Bootstrap(ctx, cc.fence, kc); err != nil {
		if errors.Is(err, store.ErrNotLeader) {
			return err
		}
		if errors.Is(err, store.ErrNotFound) {
			// No admin kubeconfig yet (a distribution's is published
			// once the control plane is ready): the Nodes read says so.
			facts.NodesError = err.Error()
			return nil
		}
		bootErr = fmt.Errorf("bootstrap token: %w", err)
		cc.logger.Warn("bootstrap token not registered", "cluster", kc.Metadata.Name, "err", err)
	}
	nodes, err := a.Nodes(ctx, kc)
	if err != nil {
		facts.NodesError = err.Error()
	}
	facts.Nodes = nodes
	return bootErr
}

func (cc *clusterController) log(cluster string, p kubeplan.RollPlan) {
	s := fmt.Sprintf("%s %v: %s", p.Action, p.Machines, p.Reason)
	if cc.last[cluster] == s {
		return
	}
	cc.last[cluster] = s
	lvl := cc.logger.Info
	if p.Action == kubeplan.None || p.Action == kubeplan.Wait {
		lvl = cc.logger.Debug
	}
	lvl("kubernetes cluster", "cluster", cluster, "action", string(p.Action), "machines", strings.Join(p.Machines, ","), "reason", p.Reason)
}

// group is a machine set of cluster's plane as the planner reads it.
func group(cluster, plane string, s api.MachineSet) kubeplan.Group {
	g := kubeplan.Group{Machines: s.Machines, Count: s.Count}
	if s.MachinePool != "" {
		g.Claim = api.KubernetesPlaneClaimName(cluster, plane)
		g.ClaimOnly = s.MachineSelector == nil
	}
	if s.MachineSelector != nil {
		g.MatchLabels = s.MachineSelector.MatchLabels
	}
	return g
}
