package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeapi"
	"github.com/homystack/nico/pkg/rollout"
	"github.com/homystack/nico/pkg/store"
)

// ClusterNodes is what a rollout of a KubernetesCluster's machines does
// to their Nodes through the cluster's own API server (KubeAPI implements
// it): read them, cordon and uncordon them, evict their pods.
type ClusterNodes interface {
	// Observe reads the Nodes named (workers and control-plane machines;
	// one without a Node reads unregistered) and, for those in drain, the
	// pods a drain still has to see gone.
	Observe(ctx context.Context, cluster string, workers, drain []string) (map[string]rollout.KubeNode, error)
	// Cordon makes Node node unschedulable (on) or schedulable again,
	// only while fence holds.
	Cordon(ctx context.Context, fence store.Fence, cluster, node string, on bool) error
	// Evict asks the eviction API to evict pods (namespace/name), only
	// while fence holds; it returns the first refusal's message ("" none):
	// a PodDisruptionBudget that does not allow it yet.
	Evict(ctx context.Context, fence store.Fence, cluster string, pods []string) (refused string, err error)
}

// observeKube reads the Nodes of ro's Kubernetes machines into obs: each
// worker's Node, each control-plane machine's when it has one (it runs a
// kubelet), and the pods left on those draining. A read that fails is
// obs.KubeError (the planner waits for the workers, up to the step
// timeout; a control-plane machine rolls undrained).
func (r *rollouter) observeKube(ctx context.Context, ro *api.Rollout, obs *rollout.Observed) {
	k := ro.Spec.Kubernetes
	if k == nil || len(k.Workers)+len(k.Leaving)+len(k.ControlPlane) == 0 || ro.Status.Phase.Finished() {
		return
	}
	if len(k.Workers)+len(k.Leaving) == 0 {
		// Only control-plane machines: a read of an API server that does
		// not answer must not slow their roll (they roll undrained then).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, controlPlaneObserveTimeout)
		defer cancel()
	}
	workers := slices.Concat(k.Workers, k.Leaving, k.ControlPlane)
	cn := r.hooks.Nodes
	if cn == nil {
		obs.KubeError = "this coordinator reaches no cluster's API (ClusterHooks.Nodes)"
		return
	}
	var drain []string
	for _, p := range ro.Status.Nodes {
		if p.Phase == api.NodeDraining {
			drain = append(drain, p.Name)
		}
	}
	nodes, err := cn.Observe(ctx, k.Cluster, workers, drain)
	if err != nil {
		obs.KubeError = err.Error()
		return
	}
	for i := range obs.Nodes {
		n, ok := nodes[obs.Nodes[i].Name]
		if !ok || !ro.Spec.Drains(obs.Nodes[i].Name) && !(ro.Spec.IsAPIServer(obs.Nodes[i].Name) && n.Registered) {
			continue
		}
		n.Refused = r.refused[obs.Nodes[i].Name]
		obs.Nodes[i].Kube = &n
	}
}

// controlPlaneObserveTimeout bounds the read of the Nodes of a rollout
// of control-plane machines only.
const controlPlaneObserveTimeout = 3 * time.Second

// observeAPIServers reads, for ro's Kubernetes control-plane machines,
// their agents' last reports of their own API server into obs. A report
// of the cluster that probes no API server counts as ready (the cluster
// judges it no other way); no report counts as none.
func (r *rollouter) observeAPIServers(ctx context.Context, ro *api.Rollout, obs *rollout.Observed) error {
	k := ro.Spec.Kubernetes
	if k == nil || len(k.ControlPlane) == 0 || ro.Status.Phase.Finished() {
		return nil
	}
	for i := range obs.Nodes {
		n := &obs.Nodes[i]
		if !ro.Spec.IsAPIServer(n.Name) {
			continue
		}
		rep := api.NewComponentReport(n.Name)
		if err := r.st.Get(ctx, store.ComponentReportKey(n.Name), rep); errors.Is(err, store.ErrNotFound) {
			continue
		} else if err != nil {
			return err
		}
		if rep.Status.Cluster != k.Cluster {
			continue
		}
		a := &rollout.APIServerReport{Ready: true, CheckedAt: rep.Status.CheckedAt}
		if h := rep.Component(api.ComponentAPIServer); h != nil {
			a.Ready, a.Message = h.Healthy, h.Message
		}
		n.APIServer = a
	}
	return nil
}

// kubeBefore is the part of step s done before its journal is written:
// an Uncordon's Nodes, and on a Halt the draining Nodes the rollout
// cordoned, are uncordoned (the journal then forgets the cordon).
func (r *rollouter) kubeBefore(ctx context.Context, ro *api.Rollout, s rollout.Step) error {
	names := rollout.Uncordons(ro, s)
	if len(names) == 0 {
		return nil
	}
	cn := r.hooks.Nodes
	if cn == nil {
		return errors.New("coordinator: no access to the cluster's API to uncordon " + strings.Join(names, ", "))
	}
	for _, name := range names {
		if err := cn.Cordon(ctx, r.fence, ro.Spec.Kubernetes.Cluster, name, false); err != nil && !errors.Is(err, kubeapi.ErrNotFound) {
			return fmt.Errorf("uncordon %s: %w", name, err)
		}
		r.log.Info("node uncordoned", "rollout", ro.Metadata.Name, "node", name)
	}
	return nil
}

// kubeAfter is the part of a Drain done after its journal: the Nodes the
// journal says the rollout cordons are cordoned, and the pods left on
// each draining worker are evicted (a refusal is kept for the next
// pass's observation and message).
func (r *rollouter) kubeAfter(ctx context.Context, ro *api.Rollout, obs rollout.Observed, s rollout.Step) error {
	if s.Action != rollout.Drain {
		return nil
	}
	cn := r.hooks.Nodes
	if cn == nil {
		return nil // observeKube said so: the planner waits
	}
	for _, name := range s.Nodes {
		p := ro.Node(name)
		var k *rollout.KubeNode
		for _, n := range obs.Nodes {
			if n.Name == name {
				k = n.Kube
			}
		}
		if p == nil || k == nil || !k.Registered {
			continue
		}
		if p.Cordoned && !k.Unschedulable {
			if err := cn.Cordon(ctx, r.fence, ro.Spec.Kubernetes.Cluster, name, true); err != nil {
				return fmt.Errorf("cordon %s: %w", name, err)
			}
			r.log.Info("node cordoned", "rollout", ro.Metadata.Name, "node", name)
		}
		if len(k.Evict) == 0 {
			continue
		}
		refused, err := cn.Evict(ctx, r.fence, ro.Spec.Kubernetes.Cluster, k.Evict)
		if err != nil {
			return fmt.Errorf("drain %s: %w", name, err)
		}
		if refused != r.refused[name] {
			r.log.Info("pods evicted", "rollout", ro.Metadata.Name, "node", name, "pods", strings.Join(k.Evict, ","), "refused", refused)
		}
		if r.refused == nil {
			r.refused = map[string]string{}
		}
		r.refused[name] = refused
	}
	return nil
}

// Observe implements ClusterNodes.
func (k *KubeAPI) Observe(ctx context.Context, cluster string, workers, drain []string) (map[string]rollout.KubeNode, error) {
	c, err := k.clientFor(ctx, cluster)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ns, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	leases, err := c.NodeLeases(ctx)
	if err != nil {
		return nil, fmt.Errorf("node leases: %w", err)
	}
	out := map[string]rollout.KubeNode{}
	for _, w := range workers {
		n, ok := ns[w]
		if !ok {
			out[w] = rollout.KubeNode{}
			continue
		}
		kn := rollout.KubeNode{Registered: true, Ready: n.Ready, Unschedulable: n.Unschedulable, NicoCordon: n.NicoCordon, Heartbeat: n.Heartbeat}
		if l := leases[w]; l.After(kn.Heartbeat) {
			kn.Heartbeat = l
		}
		if !n.Ready {
			kn.NotReady = strings.TrimSpace(n.Reason + ": " + n.Message)
			if n.Status == "" {
				kn.NotReady = "the kubelet has reported no Ready condition"
			}
		}
		if slices.Contains(drain, w) {
			pods, err := c.DrainPods(ctx, w)
			if err != nil {
				return nil, fmt.Errorf("pods on %s: %w", w, err)
			}
			for _, p := range pods {
				kn.Pods = append(kn.Pods, p.String())
				if !p.Terminating {
					kn.Evict = append(kn.Evict, p.String())
				}
			}
		}
		out[w] = kn
	}
	return out, nil
}

// Cordon implements ClusterNodes.
func (k *KubeAPI) Cordon(ctx context.Context, fence store.Fence, cluster, node string, on bool) error {
	c, err := k.clientFor(ctx, cluster)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := k.fenceCheck(fence)(ctx); err != nil {
		return err
	}
	return c.Cordon(ctx, node, on)
}

// Evict implements ClusterNodes.
func (k *KubeAPI) Evict(ctx context.Context, fence store.Fence, cluster string, pods []string) (string, error) {
	c, err := k.clientFor(ctx, cluster)
	if err != nil {
		return "", err
	}
	defer c.Close()
	refused := ""
	for _, p := range pods {
		ns, name, ok := strings.Cut(p, "/")
		if !ok {
			return "", fmt.Errorf("coordinator: pod %q: want namespace/name", p)
		}
		if err := k.fenceCheck(fence)(ctx); err != nil {
			return "", err
		}
		err := c.Evict(ctx, kubeapi.Pod{Namespace: ns, Name: name})
		switch {
		case errors.Is(err, kubeapi.ErrTooManyRequests):
			if refused == "" {
				refused = p + ": " + strings.TrimPrefix(err.Error(), kubeapi.ErrTooManyRequests.Error()+": ")
			}
		case err != nil:
			return "", fmt.Errorf("evict %s: %w", p, err)
		}
	}
	return refused, nil
}
