package kube

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/clusternix"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/kubetest"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// standaloneSpec is the generation of a Kubernetes cluster named name over
// the fleet's machines without a KubernetesCluster: a PKI the test makes,
// an etcd identity restricted to the cluster's prefix, cluster.nix and
// every file delivered inline (kubetest.StandaloneSpec).
func (f *fleet) standaloneSpec(ctx context.Context, name string) (api.NixosConfigurationSpec, error) {
	prefix := "/clusters/" + name + "/registry"
	user := "kube-apiserver:" + name
	if err := kubetest.GrantPrefix(ctx, f.root.Auth, user, prefix+"/"); err != nil {
		return api.NixosConfigurationSpec{}, err
	}
	src, err := kubetest.WritePKI(filepath.Join(f.dir, "standalone", name), "https://127.0.0.1:1", "127.0.0.1")
	if err != nil {
		return api.NixosConfigurationSpec{}, err
	}
	c, k, err := etcdtest.PKI(f.tb).Issue(pki.Request{CommonName: user, Usage: pki.UsageClient}, time.Now())
	if err != nil {
		return api.NixosConfigurationSpec{}, err
	}
	if err := kubetest.WriteEtcdClient(src, etcdtest.PKI(f.tb).CertPEM, c, k); err != nil {
		return api.NixosConfigurationSpec{}, err
	}
	cl := clusternix.Cluster{
		Name: name, Version: kubetest.Version,
		ControlPlaneEndpoint: clusternix.Endpoint{Host: "127.0.0.1", Port: 6443},
		Etcd:                 clusternix.Etcd{Provider: clusternix.EtcdNico, Endpoints: f.endpoints(), Prefix: prefix},
		Paths:                clusternix.DefaultPaths(),
	}
	for _, n := range f.nodeNames() {
		node := clusternix.Node{Name: n, Addresses: []string{f.address(n)}}
		if f.nodes[n].cfg.ClientURL != "" {
			cl.Nodes.ControlPlane = append(cl.Nodes.ControlPlane, node)
		} else {
			cl.Nodes.DataPlane = append(cl.Nodes.DataPlane, node)
		}
	}
	return kubetest.StandaloneSpec(cl, src, name)
}

// rollAndWait writes a Rollout of template over every node, control plane
// first, and waits (on a watch) until it succeeded; it returns the time from
// the write to the success.
func (f *fleet) rollAndWait(ctx context.Context, name string, template api.NixosConfigurationSpec, within time.Duration) (time.Duration, error) {
	r := api.NewRollout(name)
	r.Metadata.CreatedAt = time.Now()
	r.Spec.Template = template
	r.Spec.ControlPlaneFirst = true
	r.Spec.StepTimeout = api.Duration(2 * time.Minute)
	t0 := time.Now()
	if err := f.st.Create(ctx, store.RolloutKey(name), r); err != nil {
		return 0, fmt.Errorf("rollout %s: %w", name, err)
	}
	var failed error
	err := testwait.KeyUntil(ctx, f.st.Client(), store.RolloutKey(name) /* the store's client is namespaced */, within, func(kv *mvccpb.KeyValue) (bool, string) {
		if kv == nil {
			return false, "absent"
		}
		got := &api.Rollout{}
		if err := store.Decode(kv, got); err != nil {
			return false, err.Error()
		}
		switch got.Status.Phase {
		case api.RolloutSucceeded:
			return true, ""
		case api.RolloutHalted:
			failed = fmt.Errorf("rollout %s halted at %s: %s", name, got.Status.HaltedNode, got.Status.HaltedReason)
			return true, ""
		}
		return false, fmt.Sprintf("phase %q: %s", got.Status.Phase, got.Status.Message)
	})
	took := time.Since(t0)
	if err == nil {
		err = failed
	}
	return took, err
}

// release rolls the release generation (#minimal) over every machine,
// which stops every control plane.
func (f *fleet) release(ctx context.Context, name string) error {
	_, err := f.rollAndWait(ctx, name, api.NixosConfigurationSpec{GitRepo: "https://git.example/standalone", Flake: "#" + kubetest.ReleaseAttr}, 2*time.Minute)
	return err
}
