package objectapply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/etcdversion"
	"github.com/homystack/nico/pkg/kubeversion"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Cluster is what an apply reads and writes: the store, and etcd's
// members, whose running versions a version change is checked against.
type Cluster struct {
	Store  *store.Store
	Client *clientv3.Client
	// Health bounds each call to one member.
	Health time.Duration
	// Now is the clock of creation times; time.Now when nil.
	Now func() time.Time
}

func (c *Cluster) now() time.Time {
	if c.Now == nil {
		return time.Now().UTC()
	}
	return c.Now().UTC()
}

// clusterFacts are what an applied EtcdCluster is checked against.
type clusterFacts struct {
	// stored is the EtcdCluster in the store (nil: none yet).
	stored *api.EtcdCluster
	// members is etcd's member list, matched to nodes.
	members []membership.Member
	nodes   []*api.Node
	// running are the server versions the members report (those that
	// answered), as "3.6.16".
	running []string
}

// nodes lists the registered nodes.
func (c *Cluster) nodes(ctx context.Context) ([]*api.Node, error) {
	nodes, _, err := store.List[api.Node](ctx, c.Store, store.NodesDir)
	if err != nil {
		return nil, fmt.Errorf("reading nodes: %w", err)
	}
	return nodes, nil
}

// members observes the members and maps each to the registered node with
// its peer URL, or to the external member it is.
func (c *Cluster) members(ctx context.Context, nodes []*api.Node) ([]membership.Member, error) {
	ms, err := etcdadmin.New(c.Client, c.Health).Observe(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading members: %w", err)
	}
	return MatchMembers(ctx, c.Store, ms, nodes)
}

// MatchMembers maps each observed member to the registered node with its
// peer URL, or to the external member it is (as the coordinator does: an
// external member is no ghost), and sorts them by Label, then ID.
func MatchMembers(ctx context.Context, st *store.Store, ms []membership.Member, nodes []*api.Node) ([]membership.Member, error) {
	membership.MatchNodes(ms, nodes)
	ec := api.NewEtcdCluster()
	if err := st.Get(ctx, store.EtcdClusterKey, ec); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("reading the EtcdCluster: %w", err)
	}
	kvs, _, err := st.ListKVs(ctx, store.ExternalMembersDir)
	if err != nil {
		return nil, fmt.Errorf("reading the external members: %w", err)
	}
	membership.MatchExternal(ms, ec.Spec, store.ExternalMembersIn(kvs))
	sort.Slice(ms, func(i, j int) bool {
		if li, lj := Label(ms[i]), Label(ms[j]); li != lj {
			return li < lj
		}
		return ms[i].ID < ms[j].ID
	})
	return ms, nil
}

// Label names a member for people: its node, else its external member's
// name, else its etcd name, else its ID.
func Label(m membership.Member) string {
	switch {
	case m.Node != "":
		return m.Node
	case m.External != "":
		return m.External
	case m.Name != "":
		return m.Name
	default:
		return m.ID.String()
	}
}

// facts reads what an apply is checked against.
func (c *Cluster) facts(ctx context.Context) (clusterFacts, error) {
	var f clusterFacts
	stored := &api.EtcdCluster{}
	switch err := c.Store.Get(ctx, store.EtcdClusterKey, stored); {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return f, fmt.Errorf("reading the EtcdCluster: %w", err)
	default:
		f.stored = stored
	}
	nodes, err := c.nodes(ctx)
	if err != nil {
		return f, err
	}
	f.nodes = nodes
	if f.members, err = c.members(ctx, nodes); err != nil {
		return f, err
	}
	f.running = c.runningVersions(ctx, f.members)
	return f, nil
}

// runningVersions asks each started member for its server version; those
// that do not answer within the health timeout are left out.
func (c *Cluster) runningVersions(ctx context.Context, ms []membership.Member) []string {
	var out []string
	for _, m := range ms {
		if !m.Started() || len(m.ClientURLs) == 0 {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, c.Health)
		resp, err := c.Client.Status(sctx, m.ClientURLs[0])
		cancel()
		if err == nil && resp.Version != "" {
			out = append(out, resp.Version)
		}
	}
	return out
}

// fleetEtcdVersions are the etcd versions the fleet's members run (those
// that answer) and the one its EtcdCluster asks for (the file's, else the
// stored one's), for the Kubernetes version check of provider nico.
func (c *Cluster) fleetEtcdVersions(ctx context.Context, docs []*Document) ([]string, error) {
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
		if err := c.Store.Get(ctx, store.EtcdClusterKey, ec); err != nil && !errors.Is(err, store.ErrNotFound) {
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
func checkClustersSupport(ctx context.Context, st *store.Store, etcdVersion string, docs []*Document) error {
	if etcdVersion == "" {
		return nil
	}
	e, err := etcdversion.Parse(etcdVersion)
	if err != nil {
		return nil // readEtcdCluster names it
	}
	stored, _, err := store.List[api.KubernetesCluster](ctx, st, store.ClustersDir)
	if err != nil {
		return fmt.Errorf("reading KubernetesClusters: %w", err)
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

// norm is a URL as compared: without a trailing slash.
func norm(u string) string { return strings.TrimSuffix(u, "/") }

// uniq sorts and de-duplicates versions, oldest first.
func uniq(vs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range vs {
		if v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, errA := etcdversion.Parse(out[i])
		b, errB := etcdversion.Parse(out[j])
		if errA != nil || errB != nil {
			return out[i] < out[j]
		}
		return a.Compare(b) < 0
	})
	return out
}
