package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeplan"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errClaimTaken: another cluster holds the machine's claim.
var errClaimTaken = errors.New("coordinator: machine claimed by another cluster")

// claim claims the selected machines kc does not hold yet, each in its
// own transaction that holds only while the claim is absent: of two
// clusters (or two leaders) claiming one machine, one wins. A machine
// lost to another cluster is dropped from the selection (held by it).
func (cc *clusterController) claim(ctx context.Context, f *clusterFleet, kc *api.KubernetesCluster, sel kubeplan.Selection) (kubeplan.Selection, error) {
	name := kc.Metadata.Name
	lost := map[string]bool{}
	for _, m := range sel.All() {
		if f.claims[m] == name {
			continue
		}
		key := store.ClusterClaimKey(m)
		_, err := cc.st.FencedTxn(ctx, cc.fence, []store.Guard{{Cmp: store.Absent(key), Err: errClaimTaken}}, store.PutValueOp(key, name))
		switch {
		case errors.Is(err, errClaimTaken):
			lost[m] = true
			kv, gerr := cc.st.GetKV(ctx, key)
			if gerr == nil && kv != nil {
				f.claims[m] = string(kv.Value)
			}
		case err != nil:
			return sel, fmt.Errorf("claim %s: %w", m, err)
		default:
			f.claims[m] = name
			cc.logger.Info("machine claimed", "cluster", name, "machine", m)
		}
	}
	if len(lost) == 0 {
		return sel, nil
	}
	drop := func(ms []string) []string { return slices.DeleteFunc(ms, func(m string) bool { return lost[m] }) }
	for _, m := range sel.All() {
		if lost[m] {
			sel.Held = append(sel.Held, m)
		}
	}
	sel.ControlPlane, sel.DataPlane = drop(sel.ControlPlane), drop(sel.DataPlane)
	return sel, nil
}

// applyPlan writes what Next decided.
func (cc *clusterController) applyPlan(ctx context.Context, kc *api.KubernetesCluster, p kubeplan.RollPlan, f *clusterFleet) error {
	name := kc.Metadata.Name
	switch p.Action {
	case kubeplan.Wait:
		return cc.syncPause(ctx, kc, f)
	case kubeplan.Unclaim:
		if s := cc.hooks.Secrets; s != nil {
			if err := s.Released(ctx, cc.fence, kc, p.Machines); err != nil {
				return fmt.Errorf("release secrets: %w", err)
			}
		}
		for _, m := range p.Machines {
			key := store.ClusterClaimKey(m)
			guard := store.Guard{Cmp: store.ValueIs(key, name), Err: fmt.Errorf("%w: claim %s is not %s's", store.ErrConflict, m, name)}
			if _, err := cc.st.FencedTxn(ctx, cc.fence, []store.Guard{guard}, store.DeleteOp(key)); err != nil && !errors.Is(err, store.ErrConflict) {
				return fmt.Errorf("unclaim %s: %w", m, err)
			}
			delete(f.claims, m)
			cc.logger.Info("machine released", "cluster", name, "machine", m)
		}
	case kubeplan.Release:
		// Drained first when spec.drain is set (pass narrowed p to them).
		t := map[string]api.NixosConfigurationSpec{}
		for _, m := range p.Machines {
			t[m] = p.Templates[m]
		}
		p.Templates = t
		return cc.writeRollout(ctx, kc, p, f, true)
	case kubeplan.Roll:
		return cc.writeRollout(ctx, kc, p, f, false)
	}
	return nil
}

// writeRollout creates the cluster's next Rollout (named <cluster>-<n>)
// and deletes its finished ones, in one fenced transaction.
func (cc *clusterController) writeRollout(ctx context.Context, kc *api.KubernetesCluster, p kubeplan.RollPlan, f *clusterFleet, release bool) error {
	owned := f.owned(kc.Metadata.Name)
	seq := 0
	for _, r := range f.rollouts { // anyone's <cluster>-<n>: a name taken is skipped
		if strings.HasPrefix(r.Metadata.Name, kc.Metadata.Name+"-") && !strings.Contains(r.Metadata.Name[len(kc.Metadata.Name)+1:], "-") {
			seq = max(seq, rolloutSeq(r.Metadata.Name))
		}
	}
	r := api.NewRollout(fmt.Sprintf("%s-%d", kc.Metadata.Name, seq+1))
	r.Metadata.CreatedAt = cc.now().UTC()
	r.Metadata.OwnerReferences = []api.OwnerReference{kubeplan.Owner(kc)}
	r.Spec = api.RolloutSpec{
		Template:             kubeplan.ReleaseSpec(kc, cc.hooks.DefaultGitRepo),
		Templates:            p.Templates,
		Nodes:                slices.Clone(p.Machines),
		ControlPlaneFirst:    p.ControlPlaneFirst,
		MaxUnavailable:       kc.Spec.Rollout.MaxUnavailable,
		StepTimeout:          kc.Spec.Rollout.StepTimeout,
		Paused:               kc.Spec.Rollout.Paused,
		DeleteConfigurations: release,
	}
	// Its control-plane machines are done once their API servers are
	// ready; when the leader reaches the cluster's Nodes its workers roll
	// as Kubernetes nodes (drained before, Ready after), and machines
	// that leave are drained before their release. A cluster being
	// deleted releases its machines undrained: its workloads go with it,
	// and a disruption budget would hold the last worker's drain forever.
	k := &api.RolloutKubernetes{Cluster: kc.Metadata.Name}
	switch {
	case release && cc.hooks.Nodes != nil && !kc.Deleting():
		k.Leaving = slices.Clone(p.Machines)
	case !release:
		k.ControlPlane = slices.Clone(p.ControlPlane)
		if cc.hooks.Nodes != nil {
			k.Workers = slices.Clone(p.Workers)
		}
	}
	if len(k.Workers)+len(k.ControlPlane)+len(k.Leaving) > 0 {
		r.Spec.Kubernetes = k
	}
	if p.ControlPlaneFirst && kc.Spec.Etcd.ProviderOrDefault() == api.EtcdProviderDistribution {
		r.Spec.MaxUnavailable = "1" // the distribution's servers join one at a time
	}
	key := store.RolloutKey(r.Metadata.Name)
	put, err := store.PutOp(key, r)
	if err != nil {
		return err
	}
	ops := []clientv3.Op{put}
	for _, old := range owned {
		if old.Status.Phase.Finished() {
			ops = append(ops, store.DeleteOp(store.RolloutKey(old.Metadata.Name)))
		}
	}
	guard := store.Guard{Cmp: store.Absent(key), Err: fmt.Errorf("%w: %s exists", store.ErrConflict, key)}
	if _, err := cc.st.FencedTxn(ctx, cc.fence, []store.Guard{guard}, ops...); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil // the next pass re-reads
		}
		return fmt.Errorf("rollout %s: %w", r.Metadata.Name, err)
	}
	cc.logger.Info("cluster rollout written", "cluster", kc.Metadata.Name, "rollout", r.Metadata.Name, "machines", strings.Join(p.Machines, ","),
		"controlPlaneFirst", p.ControlPlaneFirst, "release", release, "reason", p.Reason)
	f.rollouts = append(f.rollouts, r)
	return nil
}

// syncPause carries spec.rollout.paused to the cluster's rollout in
// flight (the cluster controller owns that rollout's spec).
func (cc *clusterController) syncPause(ctx context.Context, kc *api.KubernetesCluster, f *clusterFleet) error {
	for _, r := range f.owned(kc.Metadata.Name) {
		if r.Status.Phase.Finished() || r.Spec.Paused == kc.Spec.Rollout.Paused {
			continue
		}
		next := *r
		next.Spec.Paused = kc.Spec.Rollout.Paused
		if err := cc.putGuarded(ctx, &next); err != nil {
			return fmt.Errorf("rollout %s: pause: %w", r.Metadata.Name, err)
		}
	}
	return nil
}

// putGuarded writes obj fenced and only while it is as read; a conflict
// is left to the next pass.
func (cc *clusterController) putGuarded(ctx context.Context, obj api.Object) error {
	if _, err := cc.st.PutUnchanged(ctx, cc.fence, obj); err != nil && !errors.Is(err, store.ErrConflict) {
		return err
	}
	return nil
}

// finishDeletion ends a cluster whose machines are all released: a
// snapshot keeps its data (snapshotBeforeDeletion), its
// secrets, etcd identity and prefix go (ClusterSecrets.Delete), then its
// rollouts and the cluster itself, in one fenced transaction guarded on
// the cluster being as read.
func (cc *clusterController) finishDeletion(ctx context.Context, kc *api.KubernetesCluster, f *clusterFleet) error {
	if held, err := cc.snapshotBeforeDeletion(ctx, kc); err != nil || held {
		return err
	}
	if s := cc.hooks.Secrets; s != nil {
		if err := s.Delete(ctx, cc.fence, kc); err != nil {
			return fmt.Errorf("delete secrets: %w", err)
		}
	}
	g, err := store.UnchangedGuard(kc)
	if err != nil {
		return err
	}
	ops := []clientv3.Op{store.DeleteOp(store.ClusterKey(kc.Metadata.Name)), store.DeleteOp(store.KubeconfigReportKey(kc.Metadata.Name))}
	for _, r := range f.owned(kc.Metadata.Name) {
		ops = append(ops, store.DeleteOp(store.RolloutKey(r.Metadata.Name)))
	}
	if _, err := cc.st.FencedTxn(ctx, cc.fence, []store.Guard{g}, ops...); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil
		}
		return err
	}
	cc.logger.Info("kubernetes cluster deleted", "cluster", kc.Metadata.Name)
	return nil
}

// rolloutSeq is n of a cluster's rollout named <cluster>-<n> (0: none).
func rolloutSeq(name string) int {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return 0
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil {
		return 0
	}
	return n
}
