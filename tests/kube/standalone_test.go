package kube

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/clusternix"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubeapi"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/kubetest"
	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// standalone is a Kubernetes cluster's generation over the fleet's
// machines without a KubernetesCluster, and what its driver needs.
type standalone struct {
	Spec api.NixosConfigurationSpec
	// Admin is an admin kubeconfig for cp-1's API server.
	Admin []byte
	// Token is the kubelets' bootstrap token, in the bootstrap kubeconfig
	// every machine gets; the driver registers it (registerToken).
	Token kubepki.BootstrapToken
}

// standaloneSpec is the generation of a Kubernetes cluster named name over
// the fleet's machines without a KubernetesCluster: a PKI the test makes,
// an etcd identity restricted to the cluster's prefix, cluster.nix, a
// bootstrap token and every file delivered inline (kubetest.StandaloneSpec
// and the kubelets' bootstrap kubeconfig).
func (f *fleet) standaloneSpec(ctx context.Context, name string) (standalone, error) {
	prefix := "/clusters/" + name + "/registry"
	user := "kube-apiserver:" + name
	if err := kubetest.GrantPrefix(ctx, f.root.Auth, user, prefix+"/"); err != nil {
		return standalone{}, err
	}
	const server = "https://127.0.0.1:6443"
	src, err := kubetest.WritePKI(filepath.Join(f.dir, "standalone", name), server, "127.0.0.1")
	if err != nil {
		return standalone{}, err
	}
	c, k, err := etcdtest.PKI(f.tb).Issue(pki.Request{CommonName: user, Usage: pki.UsageClient}, time.Now())
	if err != nil {
		return standalone{}, err
	}
	if err := kubetest.WriteEtcdClient(src, etcdtest.PKI(f.tb).CertPEM, c, k); err != nil {
		return standalone{}, err
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
	spec, err := kubetest.StandaloneSpec(cl, src, name)
	if err != nil {
		return standalone{}, err
	}
	v, err := kubepki.NewToken()
	if err != nil {
		return standalone{}, err
	}
	id, secret, _ := strings.Cut(v, ".")
	out := standalone{Spec: spec, Token: kubepki.BootstrapToken{ID: id, Secret: secret, Expires: time.Now().Add(time.Hour).UTC().Truncate(time.Second)}}
	ca, err := os.ReadFile(src.CACert)
	if err != nil {
		return standalone{}, err
	}
	bk, err := kubepki.TokenKubeconfig(name, server, "kubelet-bootstrap", ca, out.Token.String())
	if err != nil {
		return standalone{}, err
	}
	out.Spec.HostFiles = append(out.Spec.HostFiles, api.HostFile{Path: cl.Paths.BootstrapKubeconfig, Inline: string(bk)})
	if out.Admin, err = os.ReadFile(src.AdminKubeconfig); err != nil {
		return standalone{}, err
	}
	return out, nil
}

// registerToken registers s's bootstrap token, with the bindings for node
// bootstrapping, in its cluster as soon as the API server answers (what
// kubeadm init does before workers join); it returns when registered, or
// fails within five minutes or when ctx ends.
func (s standalone) registerToken(ctx context.Context, name string) error {
	c, err := kubeapi.FromKubeconfig(s.Admin)
	if err != nil {
		return err
	}
	defer c.Close()
	b := kubeapi.Bootstrap{TokenID: s.Token.ID, TokenSecret: s.Token.Secret, Expires: s.Token.Expires, Group: kubepki.BootstrapGroup(name),
		Description: "the standalone baseline's bootstrap token"}
	err = testwait.Until(ctx, clockwork.NewRealClock(), 5*time.Minute, 100*time.Millisecond, func() (bool, string) {
		if _, err := c.EnsureBootstrap(ctx, b, func(context.Context) error { return nil }); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	if err != nil {
		return fmt.Errorf("register the bootstrap token of %s: %w", name, err)
	}
	return nil
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
