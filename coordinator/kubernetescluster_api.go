package coordinator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeapi"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/kubeplan"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
)

// ClusterAPI is a cluster's own API server, as the leader reaches it once
// it is ready: the bootstrap token the cluster's kubelets join with, the
// Nodes its status is judged by, and the Nodes of released machines.
type ClusterAPI interface {
	// Bootstrap registers kc's current bootstrap token (kubepki's
	// <c>-bootstrap-token) as the kube-system Secret
	// bootstrap-token-<id>, with the node-bootstrapping and CSR
	// auto-approval bindings; idempotent. Every write is made only while
	// fence holds (store.ErrNotLeader otherwise).
	Bootstrap(ctx context.Context, fence store.Fence, kc *api.KubernetesCluster) error
	// Nodes reads kc's Nodes, by name.
	Nodes(ctx context.Context, kc *api.KubernetesCluster) (map[string]kubeplan.NodeState, error)
	// DeleteNode deletes the Node of machine (gone already: nil), only
	// while fence holds.
	DeleteNode(ctx context.Context, fence store.Fence, kc *api.KubernetesCluster, machine string) error
}

// KubeAPI is ClusterAPI through package kubeapi, with the cluster's admin
// kubeconfig (kubepki's, or the one the distribution wrote and an agent
// published: both are the secret <c>-kubeconfig) read from the sealed
// secret store. A write is preceded by a read of the leadership key: a
// deposed leader stops there. (The API server is not nico's store: a
// write cannot be in the fence's transaction; each write is idempotent,
// so one racing a new leader's writes the same objects.)
type KubeAPI struct {
	Secrets *secrets.Store
	Store   *store.Store
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Recheck is how long a registered token is trusted to be in place
	// before it is read back again (DefaultBootstrapRecheck when zero).
	Recheck time.Duration

	mu         sync.Mutex
	registered map[string]registration // by cluster
}

// DefaultBootstrapRecheck is KubeAPI's default Recheck.
const DefaultBootstrapRecheck = 5 * time.Minute

type registration struct {
	token, server string
	at            time.Time
}

func (k *KubeAPI) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// client is a client of kc's API server with its admin kubeconfig.
func (k *KubeAPI) client(ctx context.Context, kc *api.KubernetesCluster) (*kubeapi.Client, error) {
	return k.clientFor(ctx, kc.Metadata.Name)
}

// clientFor is a client of cluster's API server with its admin kubeconfig.
func (k *KubeAPI) clientFor(ctx context.Context, cluster string) (*kubeapi.Client, error) {
	name := api.KubeconfigSecretName(cluster)
	sec := api.NewSecret(name)
	if err := k.Secrets.Get(ctx, store.NamedSecretKey(name), sec); err != nil {
		return nil, fmt.Errorf("admin kubeconfig %s: %w", name, err)
	}
	return kubeapi.FromKubeconfig(sec.Spec.Data[api.KubeconfigSecretKey])
}

// fenceCheck fails with store.ErrNotLeader once fence is gone.
func (k *KubeAPI) fenceCheck(fence store.Fence) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := k.Store.FencedTxn(ctx, fence, nil)
		return err
	}
}

// Bootstrap implements ClusterAPI.
func (k *KubeAPI) Bootstrap(ctx context.Context, fence store.Fence, kc *api.KubernetesCluster) error {
	name := kc.Metadata.Name
	secName := kubepki.BootstrapTokenSecret(name)
	sec := api.NewSecret(secName)
	if err := k.Secrets.Get(ctx, store.NamedSecretKey(secName), sec); err != nil {
		return fmt.Errorf("bootstrap token %s: %w", secName, err)
	}
	tok, err := kubepki.ParseBootstrapToken(sec.Spec.Data)
	if err != nil {
		return err
	}
	c, err := k.client(ctx, kc)
	if err != nil {
		return err
	}
	defer c.Close()
	now := k.now()
	recheck := k.Recheck
	if recheck <= 0 {
		recheck = DefaultBootstrapRecheck
	}
	k.mu.Lock()
	last, ok := k.registered[name]
	k.mu.Unlock()
	if ok && last.token == tok.String() && last.server == c.Server && now.Sub(last.at) < recheck {
		return nil
	}
	b := kubeapi.Bootstrap{TokenID: tok.ID, TokenSecret: tok.Secret, Expires: tok.Expires, Group: kubepki.BootstrapGroup(name),
		Description: "nico: the bootstrap token of KubernetesCluster " + name}
	if _, err := c.EnsureBootstrap(ctx, b, k.fenceCheck(fence)); err != nil {
		return fmt.Errorf("register bootstrap token: %w", err)
	}
	k.mu.Lock()
	if k.registered == nil {
		k.registered = map[string]registration{}
	}
	k.registered[name] = registration{token: tok.String(), server: c.Server, at: now}
	k.mu.Unlock()
	return nil
}

// Nodes implements ClusterAPI.
func (k *KubeAPI) Nodes(ctx context.Context, kc *api.KubernetesCluster) (map[string]kubeplan.NodeState, error) {
	c, err := k.client(ctx, kc)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ns, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]kubeplan.NodeState, len(ns))
	for name, n := range ns {
		out[name] = kubeplan.NodeState{Ready: n.Ready, Status: n.Status, Reason: n.Reason, Message: n.Message}
	}
	return out, nil
}

// DeleteNode implements ClusterAPI.
func (k *KubeAPI) DeleteNode(ctx context.Context, fence store.Fence, kc *api.KubernetesCluster, machine string) error {
	c, err := k.client(ctx, kc)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := k.fenceCheck(fence)(ctx); err != nil {
		return err
	}
	return c.DeleteNode(ctx, machine)
}
