package kube

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/kubetest"
)

// drainSpec is spec.drain running the built kubectl (by path) against the
// cluster: a machine Kubernetes has no Node for has nothing to drain
// (exit 0); otherwise `kubectl drain` with extra flags.
func (f *fleet) drainSpec(extra string) string {
	script := `k="$1"; c="$2"
if ! "$k" --cache-dir="$c" --request-timeout=20s get node "$NICO_DRAIN_NODE" >/dev/null 2>&1; then echo "no node $NICO_DRAIN_NODE: nothing to drain"; exit 0; fi
exec "$k" --cache-dir="$c" --request-timeout=20s drain --ignore-daemonsets --delete-emptydir-data --force --timeout=60s ` + extra + ` "$NICO_DRAIN_NODE"`
	cmd, err := json.Marshal([]string{"/bin/sh", "-c", script, "drain", f.bins.Kubectl, filepath.Join(f.dir, "drain-kubectl-cache")})
	if err != nil {
		f.tb.Fatal(err)
	}
	return "  drain:\n    command: " + string(cmd) + "\n    timeout: 2m\n"
}

// checkDrain takes dp-2 out of cluster name's data plane with spec.drain
// set. Kubernetes knows dp-2 as a Node (there is no kubelet here: the test
// creates the object). A drain command kubectl refuses holds dp-2 in the
// cluster with MachinesDrained false naming it, the exit code and
// kubectl's output; the fixed command, run by a control-plane machine's
// agent with the admin kubeconfig, cordons the Node in the real API
// server, and only then is dp-2 released.
func (f *fleet) checkDrain(t *testing.T, ctx context.Context, ctl func(context.Context, ...string) (string, error), k kubetest.Kubectl, file, name string) {
	t.Helper()
	if _, err := k.Run(ctx, []byte("apiVersion: v1\nkind: Node\nmetadata:\n  name: dp-2\n"), "create", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, file, clusterDoc(name, "1.37.2", "dp-1", f.drainSpec("--no-such-flag")))
	if out, err := ctl(ctx, "apply", "-f", file); err != nil {
		t.Fatalf("nicoctl apply without dp-2: %v\n%s", err, out)
	}
	_, kc := f.waitCluster(t, ctx, name, 3*time.Minute, "dp-2's drain failed", func(kc *api.KubernetesCluster) bool {
		c := api.FindClusterCondition(kc.Status.Conditions, api.CondMachinesDrained)
		return c != nil && c.Status == api.ConditionFalse && c.Reason == api.ReasonDrainFailed
	})
	c := api.FindClusterCondition(kc.Status.Conditions, api.CondMachinesDrained)
	for _, want := range []string{"dp-2", "exit code 1", "unknown flag: --no-such-flag"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("MachinesDrained %q does not say %q", c.Message, want)
		}
	}
	if claim := f.claim(ctx, "dp-2"); claim != name {
		t.Fatalf("dp-2 claimed by %q after a failed drain, want %s", claim, name)
	}
	if applies := f.machines["dp-2"].Applies(); len(applies) > 0 && applies[len(applies)-1].Attr == kubetest.ReleaseAttr {
		t.Fatal("dp-2 released after a failed drain")
	}
	if got := f.unschedulable(t, ctx, k); got == "true" {
		t.Fatal("dp-2 cordoned by a drain that failed on its flags")
	}
	t.Logf("failed drain held dp-2: %s", c.Message)
	out, err := ctl(ctx, "events", "--for", "cluster/"+name)
	if err != nil {
		t.Fatalf("nicoctl events: %v\n%s", err, out)
	}
	if !strings.Contains(out, "NotMachinesDrained") || !strings.Contains(out, "drain of dp-2") || !strings.Contains(out, "exit code 1") {
		t.Errorf("nicoctl events --for cluster/%s has no warning of dp-2's failed drain:\n%s", name, out)
	}

	t0 := time.Now()
	writeFile(t, file, clusterDoc(name, "1.37.2", "dp-1", f.drainSpec("")))
	if out, err := ctl(ctx, "apply", "-f", file); err != nil {
		t.Fatalf("nicoctl apply with the fixed drain: %v\n%s", err, out)
	}
	f.waitCluster(t, ctx, name, 3*time.Minute, "dp-2 drained and released", func(kc *api.KubernetesCluster) bool {
		c := api.FindClusterCondition(kc.Status.Conditions, api.CondMachinesDrained)
		return c != nil && c.Status == api.ConditionTrue && kc.Status.DataPlane.Total == 1
	})
	testwait.For(t, 2*time.Minute, "dp-2 released and unclaimed", func() (bool, string) {
		claim := f.claim(ctx, "dp-2")
		return claim == "", "claimed by " + claim
	})
	t.Logf("fixed drain to dp-2 released: %s", time.Since(t0).Round(time.Millisecond))
	if got := f.unschedulable(t, ctx, k); got != "true" {
		t.Fatalf("Node dp-2 spec.unschedulable %q after its drain, want true (cordoned)", got)
	}
	if applies := f.machines["dp-2"].Applies(); len(applies) == 0 || applies[len(applies)-1].Attr != kubetest.ReleaseAttr {
		t.Fatal("dp-2's last generation is not its release")
	}
}

// claim is the cluster holding machine ("" none).
func (f *fleet) claim(ctx context.Context, machine string) string {
	resp, err := f.st.Client().Get(ctx, store.ClusterClaimKey(machine))
	if err != nil || len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

func (f *fleet) unschedulable(t *testing.T, ctx context.Context, k kubetest.Kubectl) string {
	t.Helper()
	out, err := k.Run(ctx, nil, "get", "node", "dp-2", "-o", "jsonpath={.spec.unschedulable}")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
