package ctl

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdversion"
	"github.com/homystack/nico/pkg/kubeversion"
	"github.com/homystack/nico/pkg/store"
)

// readKubernetesCluster decodes a KubernetesCluster strictly and checks it
// on its own (api.DecodeKubernetesCluster): every problem at once, each
// naming its field's path. Its status and metadata other than the name
// are ignored: the controller writes status, nicoctl counts generations.
func readKubernetesCluster(raw []byte) (*api.KubernetesCluster, error) {
	b, err := yamlToJSON(raw)
	if err != nil {
		return nil, err
	}
	return api.DecodeKubernetesCluster(b)
}

// planKubernetesCluster checks kc against the stored cluster (provider,
// endpoint and version changes, a deletion in progress) and the fleet's
// etcd versions (running), and returns the write: a creation at
// generation 1, or the new spec over the stored object (status kept) at
// the next generation. A refusal is a *refusal.
func (a *app) planKubernetesCluster(ctx context.Context, c *cluster, kc *api.KubernetesCluster, running []string) (write, error) {
	name := kc.Metadata.Name
	w := write{key: store.ClusterKey(name)}
	stored := &api.KubernetesCluster{}
	err := c.st.Get(ctx, w.key, stored)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return write{}, fmt.Errorf("reading KubernetesCluster %s: %w", name, err)
	}
	exists := err == nil
	var errs []error
	if exists {
		if err := api.ValidateUpdate(stored, kc); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, kc.Spec.CheckFleetEtcd(running)...)
	if len(errs) > 0 {
		return write{}, &refusal{errors.Join(errs...)}
	}
	if !exists {
		obj := api.NewKubernetesCluster(name)
		obj.Metadata.CreatedAt = a.now().UTC()
		obj.Spec = kc.Spec
		w.obj, w.msg = obj, "KubernetesCluster "+name+" created"
		return w, nil
	}
	w.rev = stored.Metadata.Revision
	if specsEqual(stored.Spec, kc.Spec) {
		w.msg = "KubernetesCluster " + name + " unchanged"
		return w, nil
	}
	change, _ := api.VersionChange(stored, kc.Spec) // checked by ValidateUpdate
	stored.Spec = kc.Spec
	stored.Metadata.Generation++
	w.obj = stored
	w.msg = fmt.Sprintf("KubernetesCluster %s configured (generation %d)", name, stored.Metadata.Generation)
	if change.Kind != "" && change.Kind != kubeversion.KindNone {
		w.msg += "; version: " + change.String()
	}
	return w, nil
}

// fleetEtcdVersions are the etcd versions the fleet's members run (those
// that answer) and the one its EtcdCluster asks for (the file's, else the
// stored one's), for the Kubernetes version check of provider nico.
func (c *cluster) fleetEtcdVersions(ctx context.Context, docs []*document) ([]string, error) {
	nodes, err := c.nodes(ctx)
	if err != nil {
		return nil, err
	}
	ms, err := c.members(ctx, nodes)
	if err != nil {
		return nil, err
	}
	out := c.runningVersions(ctx, ms)
	target := ""
	for _, d := range docs {
		if d.ec != nil {
			target = d.ec.Spec.Version
		}
	}
	if target == "" {
		ec := &api.EtcdCluster{}
		if err := c.st.Get(ctx, store.EtcdClusterKey, ec); err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("reading the EtcdCluster: %w", err)
		}
		target = ec.Spec.Version
	}
	return uniq(append(out, target)), nil
}

// checkClustersSupport refuses an EtcdCluster spec.version that a
// KubernetesCluster on the fleet's etcd (provider nico) does not support:
// the stored clusters, or their new spec where the file has one. A
// refusal is a *refusal.
func checkClustersSupport(ctx context.Context, st *store.Store, etcdVersion string, docs []*document) error {
	if etcdVersion == "" {
		return nil
	}
	e, err := etcdversion.Parse(etcdVersion)
	if err != nil {
		return nil // readEtcdCluster names it
	}
	stored, err := listClusters(ctx, st)
	if err != nil {
		return err
	}
	specs := map[string]api.KubernetesClusterSpec{}
	for _, kc := range stored {
		specs[kc.Metadata.Name] = kc.Spec
	}
	for _, d := range docs {
		if d.kc != nil {
			specs[d.kc.Metadata.Name] = d.kc.Spec
		}
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(specs)) {
		s := specs[name]
		if s.Version == "" || s.Etcd.ProviderOrDefault() != api.EtcdProviderNico {
			continue
		}
		k, err := kubeversion.Parse(s.Version)
		if err != nil {
			continue
		}
		sup, known := kubeversion.Lookup(k)
		if !known || kubeversion.CheckEtcd(k, e) == nil {
			continue
		}
		errs = append(errs, &api.FieldError{Field: "spec.version", Value: etcdVersion,
			Reason:   fmt.Sprintf("KubernetesCluster %s runs Kubernetes %s on the fleet's etcd, and Kubernetes %s supports %s", name, s.Version, k.MinorString(), sup.Range()),
			Accepted: "choose an etcd version every KubernetesCluster with etcd.provider nico supports (docs/kubernetes-clusters.md, Kubernetes versions), or change their versions first"})
	}
	if len(errs) > 0 {
		return &refusal{errors.Join(errs...)}
	}
	return nil
}
