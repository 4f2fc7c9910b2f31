package kubetest_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/clusternix"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/tests/kubetest"
)

// TestMachineGeneration runs the sandbox's generation through the exec
// applier on a control-plane and a data-plane machine, with cluster.nix
// and the host files delivered inline: the control-plane machine's API
// server answers kubectl with the kubeconfig it wrote; the same generation
// again changes nothing; the data-plane machine saw cluster.nix and the
// join token; the release generation (#minimal) stops the control plane.
func TestMachineGeneration(t *testing.T) {
	bins := kubetest.FindBinaries(t)
	ec := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: true})
	root := etcdtest.NewClient(t, ec.Endpoints()...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := rbac.EnableAuth(ctx, root.Auth, store.DefaultPrefix, nil, logging.Test(t)); err != nil {
		t.Fatal(err)
	}
	const user = "kube-apiserver:m"
	if err := kubetest.GrantPrefix(ctx, root.Auth, user, "/clusters/m/registry/"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src, err := kubetest.WritePKI(filepath.Join(dir, "src"), "https://127.0.0.1:1", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	c, k, err := etcdtest.PKI(t).Issue(pki.Request{CommonName: user, Usage: pki.UsageClient}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := kubetest.WriteEtcdClient(src, etcdtest.PKI(t).CertPEM, c, k); err != nil {
		t.Fatal(err)
	}
	cluster := clusternix.Cluster{
		Name: "m", Version: "1.37.2",
		ControlPlaneEndpoint: clusternix.Endpoint{Host: "127.0.0.1", Port: 6443},
		Nodes: clusternix.Nodes{
			ControlPlane: []clusternix.Node{{Name: "cp-1", Addresses: []string{"127.0.0.9"}}},
			DataPlane:    []clusternix.Node{{Name: "dp-1", Addresses: []string{"127.0.0.1"}}},
		},
		Etcd:  clusternix.Etcd{Provider: clusternix.EtcdNico, Endpoints: ec.Endpoints(), Prefix: "/clusters/m/registry"},
		Paths: clusternix.DefaultPaths(),
	}
	spec, err := kubetest.StandaloneSpec(cluster, src, "r1")
	if err != nil {
		t.Fatal(err)
	}
	spec.HostFiles = append(spec.HostFiles, hostFile(cluster.Paths.JoinToken, "abcdef.0123456789abcdef"))

	gate := apply.Gate{Deadline: 5 * time.Second, Interval: 50 * time.Millisecond}
	machines := map[string]*kubetest.Machine{}
	appliers := map[string]apply.Applier{}
	for _, name := range []string{"cp-1", "dp-1"} {
		m := &kubetest.Machine{Name: name, Root: filepath.Join(dir, name), Binaries: bins, Log: logging.Test(t)}
		t.Cleanup(func() {
			if err := m.Stop(); err != nil {
				t.Error(err)
			}
		})
		a, err := m.Applier(gate, nil)
		if err != nil {
			t.Fatal(err)
		}
		machines[name], appliers[name] = m, a
	}
	for _, name := range []string{"cp-1", "dp-1"} {
		if _, err := appliers[name].Apply(ctx, apply.Generation{Machine: name, Number: 1, Spec: spec}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	cp := machines["cp-1"].ControlPlane()
	if cp == nil {
		t.Fatal("cp-1 runs no control plane")
	}
	kc := kubetest.Kubectl{Bin: bins.Kubectl, Kubeconfig: filepath.Join(dir, "cp-1", "run/kubernetes/admin.conf")}
	if out, err := kc.Run(ctx, nil, "get", "ns", "kube-system", "-o", "name"); err != nil || strings.TrimSpace(string(out)) != "namespace/kube-system" {
		t.Fatalf("kubectl get ns kube-system: %q, %v", out, err)
	}
	if res, err := appliers["cp-1"].Apply(ctx, apply.Generation{Machine: "cp-1", Number: 2, Spec: spec}); err != nil || !res.Skipped {
		t.Fatalf("the same generation again: %+v, %v; want skipped", res, err)
	}
	if machines["cp-1"].ControlPlane() != cp {
		t.Fatal("the same generation restarted the control plane")
	}
	dp := machines["dp-1"].Applies()
	if len(dp) != 1 || dp[0].Role != "dataPlane" || string(dp[0].JoinToken) != "abcdef.0123456789abcdef" || !strings.Contains(string(dp[0].ClusterNix), `prefix = "/clusters/m/registry";`) {
		t.Fatalf("dp-1's applies: %+v", dp)
	}
	if machines["dp-1"].ControlPlane() != nil {
		t.Fatal("a data-plane machine runs a control plane")
	}

	release := spec
	release.Flake, release.AdditionalFiles, release.HostFiles = "#"+kubetest.ReleaseAttr, nil, nil
	if _, err := appliers["cp-1"].Apply(ctx, apply.Generation{Machine: "cp-1", Number: 3, Spec: release}); err != nil {
		t.Fatal(err)
	}
	if machines["cp-1"].ControlPlane() != nil {
		t.Fatal("the release generation left the control plane running")
	}
	select {
	case <-cp.APIServer.Done():
	default:
		t.Fatal("the API server still runs after the release")
	}
}
