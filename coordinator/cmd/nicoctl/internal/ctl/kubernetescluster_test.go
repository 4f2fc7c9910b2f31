package ctl

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
)

// clusterYAML is a KubernetesCluster document; extra lines go under spec.
func clusterYAML(name, version string, extra ...string) string {
	s := fmt.Sprintf(`apiVersion: nico.homystack.io/v1alpha1
kind: KubernetesCluster
metadata:
  name: %s
spec:
  gitRepo: https://example.org/fleet.git
  configurationSubdir: k3s
  controlPlane:
    machines: [cp-1, cp-2, cp-3]
  dataPlane:
    machineSelector:
      matchLabels: {role: worker}
    count: 2
`, name)
	if version != "" {
		s += "  version: " + version + "\n"
	}
	for _, e := range extra {
		s += "  " + e + "\n"
	}
	return s
}

const poolDoc = "apiVersion: nico.homystack.io/v1\nkind: MachinePool\nmetadata: {name: web}\nspec:\n  count: 2\n  template: {vcpus: 1, memoryMiB: 512, diskGiB: 4, baseImage: x.qcow2, network: default}\n"

func storedKC(t *testing.T, st *store.Store, name string) *api.KubernetesCluster {
	t.Helper()
	kc := &api.KubernetesCluster{}
	if err := st.Get(testCtx(t), store.ClusterKey(name), kc); err != nil {
		t.Fatal(err)
	}
	return kc
}

func TestKubernetesClusterApply(t *testing.T) {
	c := etcdtest.Start(t, 1)
	st := newStore(t, c)
	registerNode(t, st, "cp-1", c.Members[0])
	eps := c.Endpoints()
	dir := t.TempDir()
	n := 0
	write := func(docs ...string) string {
		n++
		p := filepath.Join(dir, fmt.Sprintf("f-%d.yaml", n))
		if err := os.WriteFile(p, []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// refused applies docs, wants the exit code and every piece of the
	// message, and checks that nothing at all was written.
	refused := func(t *testing.T, code int, says []string, docs ...string) {
		t.Helper()
		before, err := st.Revision(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		run(t, eps, "apply", "-f", write(docs...)).want(t, code, nil, append(says, "nothing written"))
		if after, _ := st.Revision(testCtx(t)); after != before {
			t.Fatalf("a refused apply wrote: store revision %d -> %d", before, after)
		}
	}

	t.Run("bad input: nothing written, every problem named", func(t *testing.T) {
		refused(t, ExitUsage, []string{"document 2 (KubernetesCluster)", "spec.controlPlane.replicas: 3 is not accepted: unknown field",
			"none of the file's 2 objects"}, poolDoc,
			strings.Replace(clusterYAML("prod", "1.37.2"), "    machines: [cp-1, cp-2, cp-3]\n", "    machines: [cp-1, cp-2, cp-3]\n    replicas: 3\n", 1))
		refused(t, ExitUsage, []string{`apiVersion: "nico.homystack.io/v1" is not accepted; use nico.homystack.io/v1alpha1 (nico.homystack.com/v1alpha1 is still read, deprecated)`},
			strings.Replace(clusterYAML("prod", ""), "nico.homystack.io/v1alpha1", "nico.homystack.io/v1", 1))
		refused(t, ExitUsage, []string{"document 1 (MachinePool)", `apiVersion: "nico.example/v1" is not accepted; use nico.homystack.io/v1 (nico.homystack.com/v1 is still read, deprecated)`},
			strings.Replace(poolDoc, "nico.homystack.io/v1", "nico.example/v1", 1), clusterYAML("prod", ""))
		refused(t, ExitUsage, []string{`apiVersion: "nico.homystack.io/v2" is not accepted; use nico.homystack.io/v1 `},
			strings.Replace(etcdClusterYAML(3, ""), "nico.homystack.io/v1", "nico.homystack.io/v2", 1))
		refused(t, ExitUsage, []string{"spec.dataPlane.machineSelector: map[role:worker] is not accepted: given beside machines"},
			strings.Replace(clusterYAML("prod", ""), "  dataPlane:\n", "  dataPlane:\n    machines: [w-1]\n", 1))
		refused(t, ExitUsage, []string{"spec.dataPlane.count: -1 is not accepted: negative"}, strings.Replace(clusterYAML("prod", ""), "count: 2", "count: -1", 1))
		refused(t, ExitUsage, []string{`spec.dataPlane.machineSelector.matchLabels: "bad key!" is not accepted`},
			strings.Replace(clusterYAML("prod", ""), "{role: worker}", `{"bad key!": x}`, 1))
		refused(t, ExitUsage, []string{`spec.etcd.provider: "consul" is not accepted`, "use nico"}, clusterYAML("prod", "", "etcd: {provider: consul}"))
		refused(t, ExitUsage, []string{`spec.version: "1.29.3" is not accepted`, "not in nico's version table"}, clusterYAML("prod", "1.29.3"))
		refused(t, ExitUsage, []string{"KubernetesCluster/prod is also"}, clusterYAML("prod", ""), clusterYAML("prod", ""))
		refused(t, ExitUsage, []string{`kind "Pod" is not accepted`}, poolDoc, "apiVersion: v1\nkind: Pod\n")
		// The embedded members run etcd 3.7.3; Kubernetes 1.33 supports 3.5 only.
		refused(t, ExitRefused, []string{`spec.version: "1.33.2" is not accepted`, "the fleet's etcd runs 3.7.3", "etcd 3.5.24 to 3.5.x"},
			poolDoc, clusterYAML("prod", "1.33.2"))
	})

	t.Run("create several objects, keep status, count generations", func(t *testing.T) {
		run(t, eps, "apply", "-f", write("---\n"+poolDoc, clusterYAML("prod", "1.36.4"))).
			want(t, 0, []string{"MachinePool web created", "KubernetesCluster prod created"}, nil)
		kc := storedKC(t, st, "prod")
		if kc.APIVersion != api.ClusterAPIVersion || kc.Metadata.Generation != 1 || kc.Metadata.CreatedAt.IsZero() ||
			kc.Spec.DataPlane.Count != 2 || kc.Spec.DataPlane.MachineSelector.MatchLabels["role"] != "worker" {
			t.Fatalf("stored %+v", kc)
		}
		if err := st.Get(testCtx(t), store.PoolKey("web"), api.NewMachinePool("web")); err != nil {
			t.Fatal(err)
		}
		kc.Status = api.KubernetesClusterStatus{Phase: api.ClusterReady, ObservedGeneration: 1}
		if err := st.UpdateObject(testCtx(t), kc); err != nil {
			t.Fatal(err)
		}
		run(t, eps, "apply", "-f", write(clusterYAML("prod", "1.36.4"))).want(t, 0, []string{"KubernetesCluster prod unchanged"}, nil)
		run(t, eps, "apply", "-f", write(clusterYAML("prod", "1.37.2"))).
			want(t, 0, []string{"KubernetesCluster prod configured (generation 2)", "version: MinorUpgrade 1.36.4 -> 1.37.2 (control plane first)"}, nil)
		if kc := storedKC(t, st, "prod"); kc.Metadata.Generation != 2 || kc.Status.Phase != api.ClusterReady || kc.Spec.Version != "1.37.2" {
			t.Fatalf("stored %+v", kc)
		}
	})

	t.Run("the deprecated apiVersion group is accepted with a warning", func(t *testing.T) {
		doc := strings.Replace(clusterYAML("legacy", ""), "nico.homystack.io/v1alpha1", "nico.homystack.com/v1alpha1", 1)
		run(t, eps, "apply", "-f", write(doc)).want(t, 0, []string{"KubernetesCluster legacy created"},
			[]string{`nicoctl: warning: `, `apiVersion: "nico.homystack.com/v1alpha1" is deprecated; write apiVersion: nico.homystack.io/v1alpha1`})
		if kc := storedKC(t, st, "legacy"); kc.APIVersion != api.ClusterAPIVersion {
			t.Fatalf("stored apiVersion %q, want %s", kc.APIVersion, api.ClusterAPIVersion)
		}
		raw, err := st.GetKV(testCtx(t), store.ClusterKey("legacy"))
		if err != nil || !strings.Contains(string(raw.Value), `"apiVersion":"`+api.ClusterAPIVersion+`"`) {
			t.Fatalf("stored %v, %v; want apiVersion %s", raw, err, api.ClusterAPIVersion)
		}
		pool := strings.Replace(strings.Replace(poolDoc, "nico.homystack.io/v1", "nico.homystack.com/v1", 1), "web", "legacy", 1)
		run(t, eps, "apply", "-f", write(pool)).want(t, 0, []string{"MachinePool legacy created"},
			[]string{`apiVersion: "nico.homystack.com/v1" is deprecated; write apiVersion: nico.homystack.io/v1`})
		if err := st.Delete(testCtx(t), store.PoolKey("legacy")); err != nil {
			t.Fatal(err)
		}
		if err := st.Delete(testCtx(t), store.ClusterKey("legacy")); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("refused against the live cluster: nothing written", func(t *testing.T) {
		refused(t, ExitRefused, []string{`spec.etcd.provider: "distribution" is not accepted`, "live on provider nico", "no documented migration", "none of the file's 2 objects"},
			strings.Replace(poolDoc, "count: 2", "count: 5", 1), clusterYAML("prod", "1.37.2", "etcd: {provider: distribution}"))
		kc := storedKC(t, st, "prod")
		kc.Spec.Version = "1.35.1"
		if err := st.UpdateObject(testCtx(t), kc); err != nil {
			t.Fatal(err)
		}
		refused(t, ExitRefused, []string{`spec.version: "1.37.2" is not accepted`, "from the stored spec.version 1.35.1 to 1.37.2: 2 minors up", "upgrade to 1.36.x first"},
			clusterYAML("prod", "1.37.2"))
		refused(t, ExitRefused, []string{"spec.controlPlaneEndpoint", "immutable"}, clusterYAML("prod", "1.35.1", "controlPlaneEndpoint: 10.0.0.100"))
	})

	t.Run("an etcd version a cluster on the fleet's etcd does not support", func(t *testing.T) {
		old := api.NewKubernetesCluster("old")
		old.Spec = api.KubernetesClusterSpec{ControlPlane: api.ControlPlaneSpec{MachineSet: api.MachineSet{Machines: []string{"x-1"}}}, Version: "1.33.1"}
		if err := st.CreateObject(testCtx(t), old); err != nil {
			t.Fatal(err)
		}
		refused(t, ExitRefused, []string{`spec.version: "3.6.16" is not accepted`, "KubernetesCluster old runs Kubernetes 1.33.1 on the fleet's etcd",
			"supports etcd 3.5.24 to 3.5.x"}, etcdClusterYAML(3, "3.6.16"))
		// The same file moving old to 1.34 makes the etcd version acceptable.
		oldDoc := "apiVersion: nico.homystack.io/v1alpha1\nkind: KubernetesCluster\nmetadata: {name: old}\nspec:\n  controlPlane: {machines: [x-1]}\n  version: 1.34.0\n"
		run(t, eps, "apply", "-f", write(etcdClusterYAML(3, "3.6.16"), oldDoc)).
			want(t, 0, []string{"EtcdCluster etcd created", "KubernetesCluster old configured (generation 2)"}, nil)
	})
}

func TestKubernetesClusterGetDescribeDelete(t *testing.T) {
	c := etcdtest.Start(t, 1)
	st := newStore(t, c)
	eps := c.Endpoints()
	created := time.Now().Add(-time.Hour).UTC()
	kc := api.NewKubernetesCluster("prod")
	kc.Metadata.CreatedAt = created
	kc.Spec = api.KubernetesClusterSpec{ControlPlane: api.ControlPlaneSpec{MachineSet: api.MachineSet{Machines: []string{"cp-1", "cp-2", "cp-3"}}},
		DataPlane: api.DataPlaneSpec{MachineSet: api.MachineSet{MachineSelector: &api.MachineSelector{MatchLabels: map[string]string{"role": "worker"}}, Count: 2}},
		Version:   "1.37.2", Drain: &api.DrainHook{Command: []string{"kubectl", "drain"}}}
	kc.Spec.ControlPlane.Components = api.ControlPlaneComponents{
		APIServer: api.ComponentSpec{ExtraArgs: map[string]string{"v": "2"}, Resources: api.ComponentResources{CPU: "500m", Memory: "512Mi"}},
		Scheduler: api.ComponentSpec{Provider: api.ComponentExternal, External: &api.ExternalComponent{URL: "https://10.0.0.5:10259/healthz"}}}
	kc.Status = api.KubernetesClusterStatus{Phase: api.ClusterProvisioning, ObservedGeneration: 1, Rollout: "prod", UpdatedAt: created.Add(3 * time.Second),
		ControlPlane: api.ReplicaStatus{Ready: 3, Total: 3, ReadyMachines: []string{"cp-1", "cp-2", "cp-3"}, Machines: []string{"cp-1", "cp-2", "cp-3"}},
		DataPlane:    api.ReplicaStatus{Ready: 1, Total: 2, ReadyMachines: []string{"w-1"}, Machines: []string{"w-1", "w-2"}},
		Components:   []api.ComponentStatus{{Name: api.ComponentAPIServer, ReplicaStatus: api.ReplicaStatus{Ready: 3, Total: 3, ReadyMachines: []string{"cp-1", "cp-2", "cp-3"}}}},
		Conditions: []api.ClusterCondition{
			{Type: api.CondDataPlaneReady, Status: api.ConditionFalse, Reason: "Rolling", Message: "w-2 applying", LastTransitionTime: created.Add(3 * time.Second)},
			{Type: api.CondEtcdReady, Status: api.ConditionTrue, LastTransitionTime: created.Add(time.Second)},
			{Type: api.CondAPIServerReady, Status: api.ConditionTrue, LastTransitionTime: created.Add(2 * time.Second)},
		}}
	if err := st.CreateObject(testCtx(t), kc); err != nil {
		t.Fatal(err)
	}

	r := run(t, eps, "get", "clusters")
	r.want(t, 0, []string{"NAME", "PHASE", "CONTROL PLANE", "DATA PLANE", "VERSION", "AGE"}, nil)
	if f := rowsByName(r.stdout)["prod"]; strings.Join(f, " ") != "prod Provisioning 3/3 1/2 1.37.2 60m" {
		t.Errorf("row = %q", f)
	}
	var got []api.KubernetesCluster
	if err := json.Unmarshal([]byte(run(t, eps, "get", "clusters", "-o", "json").stdout), &got); err != nil || len(got) != 1 || got[0].Status.DataPlane.Total != 2 {
		t.Fatalf("json: %+v %v", got, err)
	}
	run(t, eps, "get", "clusters", "nope").want(t, ExitNotFound, nil, []string{"no KubernetesCluster named nope"})

	r = run(t, eps, "describe", "cluster", "prod")
	r.want(t, 0, []string{"Generation:", "Phase:", "Provisioning", "the coordinator's default repository", "nico: the fleet's etcd, prefix /clusters/prod/registry",
		"machines cp-1, cp-2, cp-3", "2 free machines matching role=worker", "https://127.0.0.1:6443/readyz checked with the cluster CA",
		"leader lease kube-system/kube-scheduler", "kubectl drain", "1/2 ready (w-1) of w-1, w-2", "kube-apiserver", "cp-1,cp-2,cp-3",
		"ClusterCreated", "Warning", "NotDataPlaneReady", "w-2 applying",
		"native, version 1.37.2, --v=2, CPUQuota=50%, MemoryMax=536870912", "external at https://10.0.0.5:10259/healthz, version 1.37.2",
		"https://10.0.0.5:10259/healthz checked with its own serving certificate"}, nil)
	// Conditions in dependency order, events in time order.
	out := r.stdout
	if !(strings.Index(out, "  EtcdReady") < strings.Index(out, "  APIServerReady") && strings.Index(out, "  APIServerReady") < strings.Index(out, "  DataPlaneReady")) {
		t.Errorf("conditions not in dependency order:\n%s", out)
	}
	evs := out[strings.Index(out, "Events:"):]
	if !(strings.Index(evs, "ClusterCreated") < strings.Index(evs, "EtcdReady") && strings.Index(evs, "EtcdReady") < strings.Index(evs, "APIServerReady") &&
		strings.Index(evs, "APIServerReady") < strings.Index(evs, "NotDataPlaneReady")) {
		t.Errorf("events not in time order:\n%s", evs)
	}
	r.want(t, 0, []string{"Control-plane machine pool:", "Data-plane machine pool:", "- (none: the cluster asks no pool for VMs)"}, nil)

	// A data plane with a pool: what it asked for and where it runs.
	kc, err := getKubernetesCluster(testCtx(t), st, "prod")
	if err != nil {
		t.Fatal(err)
	}
	kc.Spec.DataPlane.MachinePool = "vms"
	if err := st.UpdateObject(testCtx(t), kc); err != nil {
		t.Fatal(err)
	}
	cl := api.NewMachineClaim("prod-dataplane")
	cl.Spec = api.MachineClaimSpec{Pool: "vms", Machines: []string{"vms-prod-dataplane-0"}}
	cl.Status.Machines = []api.ClaimedMachine{{Name: "vms-prod-dataplane-0", Host: "hv-2", Domain: "hv-2", Phase: api.MachineRunning}}
	if err := st.PutObject(testCtx(t), cl); err != nil {
		t.Fatal(err)
	}
	r = run(t, eps, "describe", "cluster", "prod")
	r.want(t, 0, []string{"2 machines: free ones matching role=worker, VMs from pool vms for the rest", "Data-plane machine pool:", "vms",
		"Machines asked for:"}, nil)
	if f := strings.Join(rowsByName(r.stdout)["vms-prod-dataplane-0"], " "); f != "vms-prod-dataplane-0 hv-2 hv-2 Running listed" {
		t.Errorf("claim row = %q", f)
	}
	run(t, eps, "describe", "cluster", "nope").want(t, ExitNotFound, nil, []string{"no KubernetesCluster named nope"})
	// What describe -o yaml prints, apply takes back (status and metadata kept as stored).
	y := filepath.Join(t.TempDir(), "prod.yaml")
	if err := os.WriteFile(y, []byte(run(t, eps, "describe", "cluster", "prod", "-o", "yaml").stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, eps, "apply", "-f", y).want(t, 0, []string{"KubernetesCluster prod unchanged"}, nil)
	run(t, eps, "events", "--for", "cluster/prod").want(t, 0, []string{"KubernetesCluster/prod", "ClusterCreated", "NotDataPlaneReady"}, nil)

	t.Run("kubeconfig", func(t *testing.T) {
		keyFile := filepath.Join(t.TempDir(), "secrets.key")
		k, _ := secretbox.NewKey()
		if err := os.WriteFile(keyFile, k, 0o600); err != nil {
			t.Fatal(err)
		}
		kcfg := func(args ...string) result {
			return run(t, eps, append([]string{"--secrets.keyFile", keyFile, "get", "kubeconfig"}, args...)...)
		}
		kcfg("prod").want(t, ExitNotFound, nil, []string{"KubernetesCluster prod has no kubeconfig yet (secret prod-kubeconfig)", "Provisioning"})
		kcfg("nope").want(t, ExitNotFound, nil, []string{"no KubernetesCluster named nope"})
		run(t, eps, "--secrets.keyFile", filepath.Join(t.TempDir(), "none"), "get", "kubeconfig", "prod").want(t, ExitUsage, nil, []string{"needs the store's secrets key"})
		box, err := secretbox.New(k)
		if err != nil {
			t.Fatal(err)
		}
		const value = "apiVersion: v1\nkind: Config\nclusters: []\n"
		sec := api.NewSecret("prod-kubeconfig")
		sec.Spec = api.SecretSpec{Cluster: "prod", Data: map[string][]byte{"value": []byte(value)}}
		if err := secrets.New(st, box).Put(testCtx(t), sec); err != nil {
			t.Fatal(err)
		}
		if r := kcfg("prod"); r.code != 0 || r.stdout != value {
			t.Fatalf("stdout %q, code %d; want the kubeconfig", r.stdout, r.code)
		}
		p := filepath.Join(t.TempDir(), "kubeconfig")
		kcfg("prod", "--file", p).want(t, 0, nil, []string{"written to " + p})
		b, err := os.ReadFile(p)
		fi, _ := os.Stat(p)
		if err != nil || string(b) != value || fi.Mode().Perm() != 0o600 {
			t.Fatalf("file %q mode %v, %v", b, fi.Mode(), err)
		}
	})

	t.Run("delete", func(t *testing.T) {
		run(t, eps, "delete", "cluster", "nope").want(t, ExitNotFound, nil, []string{"no KubernetesCluster named nope"})
		run(t, eps, "delete", "cluster", "prod").want(t, 0, []string{"KubernetesCluster prod marked for deletion at"}, nil)
		marked := storedKC(t, st, "prod").Metadata.DeletionTimestamp
		if marked == nil {
			t.Fatal("not marked")
		}
		// Marking again keeps the first mark; an apply is refused meanwhile.
		run(t, eps, "delete", "cluster", "prod").want(t, 0, []string{"marked for deletion at " + marked.UTC().Format(time.RFC3339)}, nil)
		p := filepath.Join(t.TempDir(), "kc.yaml")
		if err := os.WriteFile(p, []byte(clusterYAML("prod", "1.37.2")), 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, eps, "apply", "-f", p).want(t, ExitRefused, nil, []string{"being deleted", "nothing written"})

		// --wait follows the controller until the object is gone.
		out := &lines{ch: make(chan string, 16)}
		done := make(chan result, 1)
		go func() { done <- runTo(t, out, eps, "delete", "cluster", "prod", "--wait") }()
		waitLine := func(want string) {
			t.Helper()
			deadline := time.After(20 * time.Second)
			for {
				select {
				case got := <-out.ch:
					if strings.Contains(got, want) {
						return
					}
				case r := <-done:
					t.Fatalf("delete --wait ended (%d) before printing %q:\n%s%s", r.code, want, r.stdout, r.stderr)
				case <-deadline:
					t.Fatalf("no line %q", want)
				}
			}
		}
		waitLine("waiting for the controller (phase Provisioning), 5 machines held")
		kc := storedKC(t, st, "prod")
		kc.Status.Phase, kc.Status.Message = api.ClusterDeleting, "releasing w-2"
		kc.Status.DataPlane.Machines = []string{"w-2"}
		kc.Status.ControlPlane.Machines = nil
		if err := st.UpdateObject(testCtx(t), kc); err != nil {
			t.Fatal(err)
		}
		waitLine("prod: Deleting, 1 machines held (control plane 0, data plane 1): releasing w-2")
		if err := st.Delete(testCtx(t), store.ClusterKey("prod")); err != nil {
			t.Fatal(err)
		}
		if r := <-done; r.code != 0 || !strings.Contains(r.stdout, "KubernetesCluster prod deleted") {
			t.Fatalf("delete --wait: %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}
