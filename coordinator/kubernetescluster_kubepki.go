package coordinator

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNoNodeCertificate: a machine's node has published no certificate yet,
// so its secrets cannot be sealed to it.
var ErrNoNodeCertificate = errors.New("coordinator: machine has no node certificate yet")

// KubePKISecrets is ClusterSecrets over package kubepki: the cluster's
// secrets under Cluster API's names in the sealed secret store, its etcd
// user and role on nico's etcd (provider nico), kubeadm's host-file
// layout, each machine's values sealed to its node certificate. Its
// writes to nico's store (the secrets, each machine's NodeSecrets) are
// fenced on the leader's term like the leader's other writes: a deposed
// leader's write is refused (store.ErrNotLeader) and changes nothing.
// The etcd user and role (etcd's auth API has no transactions) and the
// deletion of a cluster's prefix are not fenced; they are idempotent (the
// same user, role and range every time).
type KubePKISecrets struct {
	// Secrets is the sealed secret store, Store nico's.
	Secrets *secrets.Store
	Store   *store.Store
	// Root is a root client on the whole keyspace (not under the
	// store's prefix): etcd's auth API and the clusters' prefixes.
	Root *clientv3.Client
	// NicoCA signs the API servers' etcd client certificates (provider
	// nico); its certificate is their etcd CA.
	NicoCA *pki.CA
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	// cache skips the full check of a cluster whose inputs are unchanged.
	cache ensureCache
}

func (k *KubePKISecrets) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// Ensure implements ClusterSecrets. A cluster whose inputs and marks
// (ensureCache) are those of its last full check in this term, before
// its first secret falls due, gets its host files without the check;
// any other does the full check: kubepki.Ensure, the etcd identity, each
// machine's projection.
func (k *KubePKISecrets) Ensure(ctx context.Context, fence store.Fence, kc *api.KubernetesCluster, req SecretsRequest) (map[string][]api.HostFile, error) {
	name := kc.Metadata.Name
	provider := kubepki.Provider(kc.Spec.Etcd.ProviderOrDefault())
	distKubeconfig := kc.Spec.Kubeconfig.Path != ""
	c := kubepki.Cluster{Name: name, Provider: provider, NicoCA: k.NicoCA, DistributionKubeconfig: distKubeconfig,
		Machines: append(slices.Clone(req.ControlPlane), req.DataPlane...)}
	if req.Endpoint != "" {
		c.Endpoint = "https://" + req.Endpoint
		if host, _, err := net.SplitHostPort(req.Endpoint); err == nil {
			c.APIServerNames = append(c.APIServerNames, host)
		}
	}
	for _, m := range req.ControlPlane {
		c.APIServerNames = append(c.APIServerNames, m)
		c.APIServerNames = append(c.APIServerNames, req.Addresses[m]...)
	}
	slices.Sort(c.APIServerNames)
	c.APIServerNames = slices.Compact(c.APIServerNames)
	layout := kubepki.Layout{Cluster: name, Provider: provider, DistributionKubeconfig: distKubeconfig}
	if k.NicoCA != nil {
		layout.NicoCACertPEM = k.NicoCA.CertPEM
	}
	out := map[string][]api.HostFile{}
	for _, m := range c.Machines {
		role := kubepki.RoleDataPlane
		if slices.Contains(req.ControlPlane, m) {
			role = kubepki.RoleControlPlane
		}
		out[m] = layout.HostFiles(m, role)
	}
	now := k.now()
	inputs := ensureInputs(c, kc.Spec.Etcd.Namespace, req.ControlPlane)
	// Marks that cannot be read leave the check to do and nothing to
	// remember: the check reads the store itself and says what failed.
	marks, marksErr := k.marks(ctx, c)
	if marksErr == nil && k.cache.fresh(fence, name, inputs, marks, now) {
		return out, nil
	}
	k.cache.forget(name)
	until, err := k.check(ctx, fence, c, kc.Spec.Etcd.Namespace, out, now)
	if err != nil {
		return nil, err
	}
	if marksErr == nil {
		if recheck := now.Add(pkiRecheck); recheck.Before(until) {
			until = recheck
		}
		k.cache.remember(fence, name, ensureEntry{inputs: inputs, marks: marks, at: now, until: until})
	}
	return out, nil
}

// check is Ensure's full check of cluster c at now: its secrets made and
// renewed, its etcd identity (provider nico), each machine's files
// sealed to it. It returns when the first of the secrets falls due.
func (k *KubePKISecrets) check(ctx context.Context, fence store.Fence, c kubepki.Cluster, namespaced bool, files map[string][]api.HostFile, now time.Time) (time.Time, error) {
	k.cache.checked()
	res, err := kubepki.Ensure(ctx, k.Secrets.Fenced(fence), c, now)
	if err != nil {
		return time.Time{}, err
	}
	if c.Provider == kubepki.ProviderNico {
		ensure := kubepki.EnsureEtcdIdentity
		if namespaced {
			ensure = kubepki.EnsureNamespacedEtcdIdentity
		}
		if _, err := ensure(ctx, k.Root, c.Name); err != nil {
			return time.Time{}, err
		}
	}
	for _, m := range c.Machines {
		if err := k.project(ctx, fence, c.Name, m, files[m]); err != nil {
			return time.Time{}, err
		}
	}
	return res.Until, nil
}

// project seals machine's values to its node certificate.
func (k *KubePKISecrets) project(ctx context.Context, fence store.Fence, cluster, machine string, files []api.HostFile) error {
	n := api.NewNode(machine)
	if err := k.Store.Get(ctx, store.NodeKey(machine), n); err != nil {
		return fmt.Errorf("node %s: %w", machine, err)
	}
	block, _ := pem.Decode([]byte(n.Status.Certificate))
	if block == nil {
		return fmt.Errorf("%w: %s", ErrNoNodeCertificate, machine)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("node %s: certificate: %w", machine, err)
	}
	p, err := kubepki.Select(ctx, k.Secrets, cluster, files)
	if err != nil {
		return err
	}
	_, err = kubepki.Project(ctx, k.Store, &fence, machine, cert, p)
	return err
}

// Kubeconfig implements ClusterSecrets: kubepki makes the admin
// kubeconfig with the others once the endpoint is known.
func (k *KubePKISecrets) Kubeconfig(ctx context.Context, _ store.Fence, kc *api.KubernetesCluster, _ string) (string, error) {
	name := kubepki.KubeconfigSecret(kc.Metadata.Name)
	if err := k.Secrets.Get(ctx, store.NamedSecretKey(name), api.NewSecret(name)); err != nil {
		return "", err
	}
	return name, nil
}

// Released implements ClusterSecrets.
func (k *KubePKISecrets) Released(ctx context.Context, fence store.Fence, _ *api.KubernetesCluster, machines []string) error {
	return kubepki.Unproject(ctx, k.Secrets.Fenced(fence), machines)
}

// Delete implements ClusterSecrets: the etcd user and role, the data
// under the cluster's prefix (gone for good), the secrets, and what the
// machines it last held were given.
func (k *KubePKISecrets) Delete(ctx context.Context, fence store.Fence, kc *api.KubernetesCluster) error {
	k.cache.forget(kc.Metadata.Name)
	machines := append(slices.Clone(kc.Status.ControlPlane.Machines), kc.Status.DataPlane.Machines...)
	return kubepki.Delete(ctx, k.Root, k.Secrets.Fenced(fence), kc.Metadata.Name, machines)
}
