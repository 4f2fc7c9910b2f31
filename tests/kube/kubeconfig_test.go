package kube

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/kubetest"
	"gopkg.in/yaml.v3"
)

// distKubeconfigPath is where the test's "distribution" writes its own
// kubeconfig on a control-plane machine (under that machine's root).
const distKubeconfigPath = "/etc/rancher/k3s/k3s.yaml"

// checkDistributionKubeconfig sets spec.kubeconfig.path on cluster name
// (as a k3s cluster would) and plays the distribution on its publisher,
// the first ready control-plane machine: with no file there, then an
// unparseable one, KubeconfigPublished is false naming the path; then the
// test writes a kubeconfig made from the sandbox's credentials (admin, as
// nicoctl gave it) with a wrong server, and `nicoctl get kubeconfig`
// returns it published with its server rewritten to the control-plane
// endpoint, with which the built kubectl lists the namespaces of the real
// API server; a change to the file is published again.
func (f *fleet) checkDistributionKubeconfig(t *testing.T, ctx context.Context, ctl func(context.Context, ...string) (string, error), adminKubeconfig, file, name string) {
	t.Helper()
	writeFile(t, file, clusterDoc(name, "1.37.2", "dp-1", "  kubeconfig:\n    path: "+distKubeconfigPath+"\n"))
	if out, err := ctl(ctx, "apply", "-f", file); err != nil {
		t.Fatalf("nicoctl apply with spec.kubeconfig.path: %v\n%s", err, out)
	}
	published := func(why string, reason string, says ...string) *api.KubernetesCluster {
		t.Helper()
		_, kc := f.waitCluster(t, ctx, name, 3*time.Minute, why, func(kc *api.KubernetesCluster) bool {
			c := api.FindClusterCondition(kc.Status.Conditions, api.CondKubeconfigPublished)
			if c == nil || c.Reason != reason {
				return false
			}
			for _, s := range says {
				if !strings.Contains(c.Message, s) {
					return false
				}
			}
			return true
		})
		return kc
	}
	kc := published("the missing file reported", "PublishFailed", distKubeconfigPath, "no such file")
	pub := kc.KubeconfigPublisher()
	t.Logf("publisher %s; missing: %s", pub, api.FindClusterCondition(kc.Status.Conditions, api.CondKubeconfigPublished).Message)
	target := f.machines[pub].Path(distKubeconfigPath)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, target, "{{ this is not yaml")
	published("the unparseable file reported", "PublishFailed", distKubeconfigPath, "not a kubeconfig")

	// The distribution's file: the sandbox's admin credentials, a wrong
	// server (a distribution writes its loopback address).
	b, err := os.ReadFile(adminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["clusters"].([]any)[0].(map[string]any)["cluster"].(map[string]any)["server"] = "https://127.0.0.1:1"
	write := func() {
		t.Helper()
		out, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, target, string(out))
	}
	write()
	kc = published("the distribution's kubeconfig published", "Published", "k1-kubeconfig")
	if kc.Status.KubeconfigSecret != api.KubeconfigSecretName(name) {
		t.Errorf("status.kubeconfigSecret %q", kc.Status.KubeconfigSecret)
	}
	got := filepath.Join(f.dir, "published.kubeconfig")
	if out, err := ctl(ctx, "get", "kubeconfig", name, "--file", got); err != nil {
		t.Fatalf("nicoctl get kubeconfig: %v\n%s", err, out)
	}
	text, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if want := "server: https://" + kc.Status.ControlPlaneEndpoint; !strings.Contains(string(text), want) || strings.Contains(string(text), "127.0.0.1:1\n") {
		t.Fatalf("published kubeconfig lacks %q:\n%s", want, text)
	}
	k := kubetest.Kubectl{Bin: f.bins.Kubectl, Kubeconfig: got}
	out, err := k.Run(ctx, nil, "get", "ns", "-o", "name")
	if err != nil || !strings.Contains(string(out), "namespace/kube-system") {
		t.Fatalf("kubectl --kubeconfig <published> get ns: %v\n%s", err, out)
	}

	// The file changes (a context added): published again.
	doc["contexts"] = append(doc["contexts"].([]any), map[string]any{"name": "spare", "context": map[string]any{"cluster": "x", "user": "y"}})
	write()
	testwait.For(t, time.Minute, "the changed file published", func() (bool, string) {
		out, err := ctl(ctx, "get", "kubeconfig", name)
		return err == nil && strings.Contains(out, "spare"), fmt.Sprintf("%v: %s", err, out)
	})
	f.checkLeasesWithDistributionKubeconfig(t, ctx, kc.Status.ControlPlane.Machines, write, func(m string) string { return f.machines[m].Path(distKubeconfigPath) })
}

// checkLeasesWithDistributionKubeconfig: with no admin.conf on every
// control-plane machine (nico delivers none with spec.kubeconfig.path) and the distribution's file on each (write writes it at target(m)),
// each machine's probes still read the controller-manager's and the
// scheduler's leader leases, with that file.
func (f *fleet) checkLeasesWithDistributionKubeconfig(t *testing.T, ctx context.Context, machines []string, write func(), target func(string) string) {
	t.Helper()
	pubTarget := ""
	for _, m := range machines {
		// nico delivers no admin.conf with spec.kubeconfig.path; should
		// one be left, it is moved away for the check.
		admin := f.machines[m].Path("/etc/kubernetes/admin.conf")
		if err := os.Rename(admin, admin+".away"); err == nil {
			t.Logf("%s: admin.conf left with spec.kubeconfig.path set; moved away for the check", m)
			defer func() {
				if err := os.Rename(admin+".away", admin); err != nil {
					t.Error(err)
				}
			}()
		} else if !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(target(m)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Without the distribution's file no machine reads the leases, and
	// every report says so: one that read them changes, so its agent
	// writes it. From the file's return, each report changes again.
	for _, m := range machines {
		if err := os.Remove(target(m)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	f.waitLeaseReports(t, ctx, machines, time.Time{}, false)
	since := time.Now()
	// write writes the publisher's file; copy it to the others.
	write()
	for _, m := range machines {
		if b, err := os.ReadFile(target(m)); err == nil {
			pubTarget = target(m)
			for _, o := range machines {
				if err := os.WriteFile(target(o), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			break
		}
	}
	if pubTarget == "" {
		t.Fatal("no control-plane machine has the distribution's kubeconfig")
	}
	f.waitLeaseReports(t, ctx, machines, since, true)
}

// waitLeaseReports waits until every machine's ComponentReport, checked
// after since (zero: any), says the controller-manager's and the
// scheduler's leader leases were read (read) or were not.
func (f *fleet) waitLeaseReports(t *testing.T, ctx context.Context, machines []string, since time.Time, read bool) {
	t.Helper()
	testwait.For(t, time.Minute, fmt.Sprintf("leader leases read %v in every report", read), func() (bool, string) {
		var pending []string
		for _, m := range machines {
			r := &api.ComponentReport{}
			if err := f.st.Get(ctx, store.ComponentReportKey(m), r); err != nil {
				pending = append(pending, m+": "+err.Error())
				continue
			}
			if !r.Status.CheckedAt.After(since) {
				pending = append(pending, m+": report checked before the file changed")
				continue
			}
			for _, c := range []string{api.ComponentControllerManager, api.ComponentScheduler} {
				if h := r.Component(c); h == nil || (h.LeaderHolder != "") != read {
					pending = append(pending, fmt.Sprintf("%s: %s: lease holder read %v, want %v (%+v)", m, c, h != nil && h.LeaderHolder != "", read, h))
				}
			}
		}
		return len(pending) == 0, strings.Join(pending, "; ")
	})
}
