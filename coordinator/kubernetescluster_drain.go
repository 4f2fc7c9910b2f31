package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeplan"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// drain runs spec.drain before a release (kubeplan.PlanDrain): it writes
// the drain requests the plan asks for, fenced and only while each is as
// read, and narrows p to the machines drained, which may be released now.
// The agent of the request's runner (agent/drain.go) runs the command and
// answers in the request's status. A failed attempt is retried on the
// coordinator's clock once its backoff passed (kubeplan.DrainRetryAt),
// at the first pass after it: the resync tick brings that pass.
func (cc *clusterController) drain(ctx context.Context, kc *api.KubernetesCluster, p kubeplan.RollPlan, f *clusterFleet) (kubeplan.RollPlan, kubeplan.Condition, error) {
	name := kc.Metadata.Name
	dp := kubeplan.PlanDrain(kubeplan.DrainFacts{Cluster: name, Hook: *kc.Spec.Drain, Kubeconfig: kc.Spec.Kubeconfig.Path,
		Machines: p.Machines, Requests: f.drains, Runners: cc.drainRunners(kc, f), Deleting: kc.Deleting(), Now: cc.now()})
	for _, spec := range dp.Write {
		req := f.drains[spec.Machine]
		if req == nil {
			req = api.NewDrainRequest(spec.Machine)
		}
		next := *req
		next.Spec = spec
		if next.Metadata.CreatedAt.IsZero() {
			next.Metadata.CreatedAt = cc.now().UTC()
		}
		if err := cc.putGuarded(ctx, &next); err != nil {
			return p, dp.Condition, fmt.Errorf("drain request %s: %w", spec.Machine, err)
		}
		cc.logger.Info("drain asked", "cluster", name, "machine", spec.Machine, "runner", spec.Runner, "attempt", spec.Attempt)
	}
	if !dp.Condition.Status && dp.Condition.Reason != api.ReasonDraining {
		cc.logger.Warn("machines held undrained", "cluster", name, "reason", dp.Condition.Reason, "message", dp.Condition.Message, "retryAt", dp.RetryAt)
	}
	drained := map[string]bool{}
	for _, m := range dp.Drained {
		drained[m] = true
	}
	p.Machines = slices.DeleteFunc(slices.Clone(p.Machines), func(m string) bool { return !drained[m] })
	return p, dp.Condition, nil
}

// drainRunners are kc's control-plane machines that can run a drain,
// sorted: alive, running the cluster's configuration and, unless the
// cluster is being deleted (its agents then stop probing), with a fresh
// report of a healthy API server. The control plane is the status's (the
// selection's, as last written), the spec's list, and the runners
// already asked (a deleted cluster's status no longer lists machines).
func (cc *clusterController) drainRunners(kc *api.KubernetesCluster, f *clusterFleet) []string {
	interval := time.Duration(kc.Spec.Probes.WithDefaults().Interval)
	now := cc.now()
	cands := slices.Concat(kc.Status.ControlPlane.Machines, kc.Spec.ControlPlane.Machines)
	for _, r := range f.drains {
		if r.Spec.Cluster == kc.Metadata.Name {
			cands = append(cands, r.Spec.Runner)
		}
	}
	var out []string
	for _, m := range cands {
		if !f.alive[m] || f.claims[m] != kc.Metadata.Name || !runsCluster(f.configs[m], kc.Metadata.Name) {
			continue
		}
		if !kc.Deleting() {
			r := f.reports[m]
			if !r.Fresh(kc.Metadata.Name, now, interval) {
				continue
			}
			if h := r.Component(api.ComponentAPIServer); h == nil || !h.Healthy {
				continue
			}
		}
		out = append(out, m)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// dropDrains deletes kc's drain requests of machines it no longer
// releases (taken back into the cluster, or unclaimed), fenced.
func (cc *clusterController) dropDrains(ctx context.Context, kc *api.KubernetesCluster, releasing map[string]api.NixosConfigurationSpec, f *clusterFleet) error {
	var ops []clientv3.Op
	var gone []string
	for m, r := range f.drains {
		if r.Spec.Cluster != kc.Metadata.Name {
			continue
		}
		if _, ok := releasing[m]; ok {
			continue
		}
		ops = append(ops, store.DeleteOp(store.DrainRequestKey(m)))
		gone = append(gone, m)
	}
	if len(ops) == 0 {
		return nil
	}
	if _, err := cc.st.FencedTxn(ctx, cc.fence, nil, ops...); err != nil {
		return fmt.Errorf("drop drain requests: %w", err)
	}
	for _, m := range gone {
		delete(f.drains, m)
	}
	slices.Sort(gone)
	cc.logger.Info("drain requests dropped", "cluster", kc.Metadata.Name, "machines", strings.Join(gone, ","))
	return nil
}
