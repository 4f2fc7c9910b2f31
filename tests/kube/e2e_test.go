package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/kubetest"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// clusterYAML is the KubernetesCluster of the end-to-end test, at version.
func clusterYAML(name, version string) string { return clusterDoc(name, version, "dp-1, dp-2", "") }

// clusterDoc is clusterYAML with the data plane's machines and extra
// lines of spec (indented by two).
func clusterDoc(name, version, dataPlane, extra string) string {
	return fmt.Sprintf(`apiVersion: nico.homystack.io/v1alpha1
kind: KubernetesCluster
metadata:
  name: %s
spec:
  gitRepo: https://git.example/kube
  version: "%s"
  controlPlane:
    machines: [cp-1, cp-2, cp-3]
  dataPlane:
    machines: [%s]
  etcd:
    provider: nico
  probes:
    interval: 1s
  rollout:
    stepTimeout: 3m
%s`, name, version, dataPlane, extra)
}

// TestKubernetesClusterEndToEnd declares a KubernetesCluster with
// etcd.provider nico over three control-plane and two data-plane machines
// of the sandbox with nicoctl apply. The exec applier's generation on each
// control-plane machine starts a real kube-apiserver, controller-manager
// and scheduler with the files nico delivered, on nico's etcd under the
// cluster's prefix. The test follows the phase from Provisioning to Ready
// and the conditions in dependency order, uses the published kubeconfig
// with the built kubectl against every API server, checks that the API
// servers' etcd identity reaches its prefix only and what the data-plane
// machines received, rolls a version change control plane first (and
// sees one refused), and deletes the cluster: prefix, identity and secrets
// gone, machines released.
func TestKubernetesClusterEndToEnd(t *testing.T) {
	kubetest.FindBinaries(t) // skips (or fails) before the nicoctl build
	nicoctl := nicoctlBin(t)
	f := newFleet(t, fleetOptions{cps: 3, dps: 2, clusters: true})
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	defer cancel()
	const name = "k1"
	ctl := f.nicoctl(nicoctl)

	// Provisioning -> Ready, conditions in dependency order.
	file := filepath.Join(f.dir, "k1.yaml")
	writeFile(t, file, clusterYAML(name, "1.37.1"))
	t0 := time.Now()
	if out, err := ctl(ctx, "apply", "-f", file); err != nil {
		t.Fatalf("nicoctl apply: %v\n%s", err, out)
	}
	seen, kc := f.waitCluster(t, ctx, name, 6*time.Minute, "Ready at 1.37.1", func(kc *api.KubernetesCluster) bool {
		return kc.Status.Phase == api.ClusterReady && kc.Status.Version == "1.37.1"
	})
	t.Logf("apply to Ready: %s; phases seen: %v", time.Since(t0).Round(time.Millisecond), seen)
	if len(seen) == 0 || seen[0] != api.ClusterProvisioning {
		t.Errorf("phases seen %v, want Provisioning first", seen)
	}
	checkConditionOrder(t, kc)
	if kc.Status.ControlPlane.Ready != 3 || kc.Status.DataPlane.Ready != 2 {
		t.Errorf("status planes: control %+v, data %+v; want 3 and 2 ready", kc.Status.ControlPlane, kc.Status.DataPlane)
	}
	for _, m := range []string{"cp-1", "cp-2", "cp-3"} {
		if f.machines[m].ControlPlane() == nil {
			t.Errorf("%s runs no control plane at Ready", m)
		}
	}

	// The published kubeconfig works with the built kubectl, at the
	// endpoint and at every API server.
	kubeconfig := filepath.Join(f.dir, "k1.kubeconfig")
	if out, err := ctl(ctx, "get", "kubeconfig", name, "--file", kubeconfig); err != nil {
		t.Fatalf("nicoctl get kubeconfig: %v\n%s", err, out)
	}
	k := kubetest.Kubectl{Bin: f.bins.Kubectl, Kubeconfig: kubeconfig}
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := k.Run(ctx, nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	if got := kubectl("get", "--raw", "/readyz"); got != "ok" {
		t.Fatalf("kubectl get --raw /readyz = %q", got)
	}
	if got := kubectl("get", "ns", "-o", "name"); !strings.Contains(got, "namespace/kube-system") {
		t.Fatalf("kubectl get ns = %q", got)
	}
	kubectl("create", "configmap", "e2e", "--from-literal=answer=42")
	for _, m := range []string{"cp-1", "cp-2", "cp-3"} {
		server := "https://" + f.address(m) + ":6443"
		if got := kubectl("--server", server, "get", "configmap", "e2e", "-o", "jsonpath={.data.answer}"); got != "42" {
			t.Errorf("configmap e2e through %s's API server: %q, want 42", m, got)
		}
	}

	// The API servers' etcd identity, with the certificate nico delivered,
	// reaches the cluster's prefix and nothing else.
	cp1 := f.machines["cp-1"]
	p := kubepki.DefaultPaths()
	id, err := pki.ClientTLS(cp1.Path(p.EtcdCACert), cp1.Path(p.EtcdClientCert), cp1.Path(p.EtcdClientKey))
	if err != nil {
		t.Fatal(err)
	}
	idc := f.dialWith(t, id)
	prefix := api.ClusterEtcdPrefix(name)
	if resp, err := idc.Get(ctx, prefix+"/configmaps/default/e2e"); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("its identity reads the configmap under %s: %v, %v", prefix, resp, err)
	}
	for _, key := range []string{store.DefaultPrefix + store.NodeKey("cp-1"), "/clusters/k2/registry/x", prefix + "x", "/x"} {
		if _, err := idc.Get(ctx, key); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("its identity reads %q: %v, want permission denied", key, err)
		}
		if _, err := idc.Put(ctx, key, "x"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("its identity writes %q: %v, want permission denied", key, err)
		}
	}

	// What the data plane received: cluster.nix naming every machine and
	// the prefix, the bootstrap kubeconfig and token (not in cluster.nix), no CA key.
	token := f.checkDataPlane(t, name, prefix)

	// A version change: refused two minors up, rolled control plane first
	// one patch up.
	writeFile(t, file, clusterYAML(name, "1.39.0"))
	if out, err := ctl(ctx, "apply", "-f", file); err == nil || !strings.Contains(out, "1.37") || !strings.Contains(out, "1.39") {
		t.Errorf("apply 1.37.1 -> 1.39.0: %v\n%s\nwant refused naming both versions", err, out)
	}
	mark := time.Now()
	writeFile(t, file, clusterYAML(name, "1.37.2"))
	if out, err := ctl(ctx, "apply", "-f", file); err != nil {
		t.Fatalf("nicoctl apply 1.37.2: %v\n%s", err, out)
	}
	f.waitCluster(t, ctx, name, 6*time.Minute, "Ready at 1.37.2", func(kc *api.KubernetesCluster) bool {
		return kc.Status.Phase == api.ClusterReady && kc.Status.Version == "1.37.2"
	})
	f.checkControlPlaneFirst(t, mark, "1.37.2")
	if got := kubectl("get", "configmap", "e2e", "-o", "jsonpath={.data.answer}"); got != "42" {
		t.Errorf("configmap e2e after the version roll: %q", got)
	}

	// A data-plane machine leaves: drained with real kubectl first.
	f.checkDrain(t, ctx, ctl, k, file, name)

	// The distribution writes its own kubeconfig; an agent publishes it.
	f.checkDistributionKubeconfig(t, ctx, ctl, kubeconfig, file, name)

	// Deletion: configurations released, prefix, identity and secrets
	// gone.
	if out, err := ctl(ctx, "delete", "cluster", name, "--wait"); err != nil {
		t.Fatalf("nicoctl delete cluster --wait: %v\n%s", err, out)
	}
	f.checkDeleted(t, ctx, name, token)
}

// dependsOn is each condition's prerequisites (etcd, then the API
// servers, then controller-manager and scheduler side by side, then the
// data plane).
var dependsOn = map[string][]string{
	api.CondAPIServerReady:         {api.CondEtcdReady},
	api.CondControllerManagerReady: {api.CondAPIServerReady},
	api.CondSchedulerReady:         {api.CondAPIServerReady},
	api.CondControlPlaneReady:      {api.CondControllerManagerReady, api.CondSchedulerReady},
	api.CondDataPlaneReady:         {api.CondControlPlaneReady},
}

// checkConditionOrder checks that kc's conditions are all true and none
// became true before a condition it depends on.
func checkConditionOrder(t *testing.T, kc *api.KubernetesCluster) {
	t.Helper()
	at := map[string]time.Time{}
	for _, typ := range api.ClusterConditionTypes {
		c := api.FindClusterCondition(kc.Status.Conditions, typ)
		if c == nil || c.Status != api.ConditionTrue {
			t.Errorf("condition %s: %+v, want True", typ, c)
			continue
		}
		at[typ] = c.LastTransitionTime
	}
	for typ, deps := range dependsOn {
		for _, d := range deps {
			if at[typ].Before(at[d]) {
				t.Errorf("condition %s became true at %s, before %s (%s) it depends on", typ, at[typ], d, at[d])
			}
		}
	}
}

// waitCluster follows cluster name on a watch until cond holds, and
// returns the phases it went through and the object.
func (f *fleet) waitCluster(t *testing.T, ctx context.Context, name string, within time.Duration, what string, cond func(*api.KubernetesCluster) bool) ([]api.ClusterPhase, *api.KubernetesCluster) {
	t.Helper()
	return f.waitClusterTB(t, ctx, name, within, cond, what)
}

// waitClusterTB is waitCluster for any testing.TB.
func (f *fleet) waitClusterTB(t testing.TB, ctx context.Context, name string, within time.Duration, cond func(*api.KubernetesCluster) bool, what ...string) ([]api.ClusterPhase, *api.KubernetesCluster) {
	t.Helper()
	var seen []api.ClusterPhase
	var last *api.KubernetesCluster
	err := testwait.KeyUntil(ctx, f.st.Client(), store.ClusterKey(name), within, func(kv *mvccpb.KeyValue) (bool, string) {
		if kv == nil {
			return false, "absent"
		}
		kc := &api.KubernetesCluster{}
		if err := store.Decode(kv, kc); err != nil {
			return false, err.Error()
		}
		last = kc
		if ph := kc.Status.Phase; ph != "" && (len(seen) == 0 || seen[len(seen)-1] != ph) {
			seen = append(seen, ph)
		}
		return cond(kc), fmt.Sprintf("phase %s version %q: %s; conditions %+v", kc.Status.Phase, kc.Status.Version, kc.Status.Message, kc.Status.Conditions)
	})
	if err != nil {
		t.Fatalf("waiting for cluster %s %v: %v", name, what, err)
	}
	return seen, last
}

// checkDataPlane checks what the data-plane machines' generations got and
// returns the bootstrap token: the bootstrap kubeconfig holds it with the
// endpoint; the servers' join token is not there.
func (f *fleet) checkDataPlane(t *testing.T, name, prefix string) string {
	t.Helper()
	var token string
	for _, m := range []string{"dp-1", "dp-2"} {
		applies := f.machines[m].Applies()
		if len(applies) == 0 {
			t.Fatalf("%s ran no generation", m)
		}
		a := applies[len(applies)-1]
		nix := string(a.ClusterNix)
		for _, want := range []string{`name = "` + name + `";`, `prefix = "` + prefix + `";`, `"cp-1"`, `"dp-2"`} {
			if !strings.Contains(nix, want) {
				t.Errorf("%s's cluster.nix lacks %s:\n%s", m, want, nix)
			}
		}
		if a.Role != "dataPlane" {
			t.Errorf("%s's role in cluster.nix: %q", m, a.Role)
		}
		tok := strings.TrimSpace(string(a.BootstrapToken))
		if len(tok) != 23 {
			t.Errorf("%s's bootstrap token %q (at cluster.nix's paths.bootstrapToken): want <id>.<secret>", m, tok)
		}
		if token == "" {
			token = tok
		} else if tok != token {
			t.Errorf("%s's bootstrap token differs from dp-1's", m)
		}
		if kc := string(a.BootstrapKubeconfig); tok == "" || !strings.Contains(kc, "token: "+tok) || !strings.Contains(kc, "certificate-authority-data:") {
			t.Errorf("%s's bootstrap kubeconfig lacks the token or the CA:\n%s", m, kc)
		}
		if len(a.JoinToken) != 0 {
			t.Errorf("%s holds the servers' join token", m)
		}
		if tok != "" && strings.Contains(nix, tok) {
			t.Errorf("%s's cluster.nix holds the bootstrap token (it goes through the Nix store)", m)
		}
		if _, err := os.Stat(f.machines[m].Path(kubepki.DefaultPaths().CAKey)); err == nil {
			t.Errorf("%s holds the cluster CA's key", m)
		}
		if f.machines[m].ControlPlane() != nil {
			t.Errorf("%s runs a control plane", m)
		}
	}
	return token
}

// checkControlPlaneFirst checks that, after mark, every control-plane
// machine finished its generation of version before a data-plane machine
// started one.
func (f *fleet) checkControlPlaneFirst(t *testing.T, mark time.Time, version string) {
	t.Helper()
	var cpDone, dpStart time.Time
	for _, m := range f.machineList() {
		var got *kubetest.Apply
		for _, a := range m.Applies() {
			if a.Started.After(mark) && a.Version == version && a.Action == "apply" {
				got = &a
				break
			}
		}
		if got == nil {
			t.Errorf("%s ran no generation of %s", m.Name, version)
			continue
		}
		if strings.HasPrefix(m.Name, "cp-") {
			if !got.Restarted {
				t.Errorf("%s's control plane was not restarted for %s", m.Name, version)
			}
			if got.Finished.After(cpDone) {
				cpDone = got.Finished
			}
		} else if dpStart.IsZero() || got.Started.Before(dpStart) {
			dpStart = got.Started
		}
	}
	if !dpStart.After(cpDone) {
		t.Errorf("the data plane started %s at %s, before the control plane was done (%s)", version, dpStart, cpDone)
	}
}

// checkDeleted checks that nothing of cluster name is left.
func (f *fleet) checkDeleted(t *testing.T, ctx context.Context, name, token string) {
	t.Helper()
	if resp, err := f.root.Get(ctx, kubepki.ClusterKeyPrefix(name), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Errorf("keys under %s after deletion: %v, %v", kubepki.ClusterKeyPrefix(name), resp, err)
	}
	if _, err := f.root.UserGet(ctx, kubepki.EtcdUser(name)); !errors.Is(err, rpctypes.ErrUserNotFound) {
		t.Errorf("etcd user %s after deletion: %v", kubepki.EtcdUser(name), err)
	}
	if _, err := f.root.RoleGet(ctx, kubepki.EtcdUser(name)); !errors.Is(err, rpctypes.ErrRoleNotFound) {
		t.Errorf("etcd role %s after deletion: %v", kubepki.EtcdUser(name), err)
	}
	resp, err := f.st.Client().Get(ctx, store.NamedSecretsDir, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if strings.HasPrefix(strings.TrimPrefix(string(kv.Key), store.NamedSecretsDir), name+"-") {
			t.Errorf("secret %s left after deletion", kv.Key)
		}
	}
	all, err := f.root.Get(ctx, "", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range all.Kvs {
		if token != "" && strings.Contains(string(kv.Value), token) {
			t.Errorf("the bootstrap token is still in etcd, at %s", kv.Key)
		}
	}
	for _, m := range f.machineList() {
		if m.ControlPlane() != nil {
			t.Errorf("%s still runs a control plane", m.Name)
		}
		var cfg api.NixosConfiguration
		if err := f.st.Get(ctx, store.NixosConfigKey(m.Name), &cfg); err == nil && cfg.Spec.Flake != "#"+kubetest.ReleaseAttr {
			t.Errorf("%s's configuration after deletion: %+v, want released", m.Name, cfg.Spec)
		}
		applies := m.Applies()
		if len(applies) == 0 || applies[len(applies)-1].Attr != kubetest.ReleaseAttr {
			t.Errorf("%s's last generation is not the release (#minimal)", m.Name)
		}
		for _, p := range []string{kubepki.DefaultPaths().JoinToken, kubepki.DefaultPaths().BootstrapToken, kubepki.DefaultPaths().BootstrapKubeconfig} {
			if _, err := os.Stat(m.Path(p)); err == nil {
				t.Errorf("%s still holds %s", m.Name, p)
			}
		}
	}
	if slices.ContainsFunc(f.nodeNames(), func(n string) bool {
		kv, err := f.st.Client().Get(ctx, store.ClusterClaimKey(n))
		return err == nil && len(kv.Kvs) > 0
	}) {
		t.Error("a machine is still claimed after deletion")
	}
}

func writeFile(t *testing.T, path, content string) { t.Helper(); writeFileTB(t, path, content) }

func writeFileTB(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
