package kubetest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/kubeapi"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/kubetest"
)

// TestRealKubeletJoins: a real kubelet on containerd, given only a
// bootstrap kubeconfig (endpoint, cluster CA, a bootstrap token registered
// by kubeapi.EnsureBootstrap), registers through the CSR auto-approval:
// its client certificate is signed by the cluster CA and its Node turns
// Ready.
func TestRealKubeletJoins(t *testing.T) {
	bins := kubetest.FindBinaries(t)
	if !kubetest.InNetns(t, "TestRealKubeletJoins", "10.77.0.2/24") {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := startControlPlane(ctx, t, bins, "c1")
	admin := cl.admin
	tok := kubepki.BootstrapToken{ID: "abcdef", Secret: "0123456789abcdef", Expires: time.Now().Add(time.Hour)}
	if _, err := admin.EnsureBootstrap(ctx, kubeapi.Bootstrap{TokenID: tok.ID, TokenSecret: tok.Secret, Expires: tok.Expires, Group: kubepki.BootstrapGroup("c1")},
		func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	bk := cl.bootstrapKubeconfig(t, tok)
	dir := t.TempDir()
	images, err := kubetest.BuildImages(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	bkPath := filepath.Join(dir, "bootstrap-kubelet.conf")
	if err := os.WriteFile(bkPath, bk, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	w, err := kubetest.StartWorker(kubetest.WorkerConfig{Kubelet: bins.Kubelet, Name: "w-1", NodeIP: "10.77.0.2",
		BootstrapKubeconfig: bkPath, CACert: cl.files.CACert, Dir: filepath.Join(dir, "w-1"), Images: images})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Stop(); err != nil {
			t.Error(err)
		}
	})
	last := "no Node yet"
	for {
		nodes, err := admin.Nodes(ctx)
		if err == nil {
			if n, ok := nodes["w-1"]; ok {
				if n.Ready {
					break
				}
				last = n.Status + " " + n.Reason + ": " + n.Message
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Node w-1 not Ready: %s; kubelet log ends:\n%s\ncontainerd log ends:\n%s", last, w.Kubelet.Tail(4000), w.Containerd.Tail(2000))
		case <-w.Kubelet.Done():
			t.Fatalf("the kubelet exited; its log ends:\n%s", w.Kubelet.Tail(4000))
		case <-time.After(200 * time.Millisecond): // the pause between two reads
		}
	}
	t.Logf("Node w-1 Ready %s after the kubelet started", time.Since(start).Round(time.Millisecond))
	// The kubelet's heartbeats, as the rollout's gate reads them: its
	// Ready condition's heartbeat and its Node Lease's renewal (the Lease
	// comes a moment after the Node), both since it started (one host:
	// one clock).
	since := start.Add(-time.Second)
	testwait.For(t, 30*time.Second, "w-1's heartbeats since the kubelet started", func() (bool, string) {
		leases, err := admin.NodeLeases(ctx)
		if err != nil {
			return false, err.Error()
		}
		nodes, err := admin.Nodes(ctx)
		if err != nil {
			return false, err.Error()
		}
		return !leases["w-1"].Before(since) && !nodes["w-1"].Heartbeat.Before(since),
			fmt.Sprintf("lease renewed %s, Ready condition %s; the kubelet started %s", leases["w-1"], nodes["w-1"].Heartbeat, start)
	})
	if b, err := os.ReadFile(w.Kubeconfig); err != nil || strings.Contains(string(b), tok.String()) {
		t.Fatalf("the kubelet's own kubeconfig: %v (holds the bootstrap token: %v)", err, strings.Contains(string(b), tok.String()))
	}

	// A pod of the image made offline runs on it; its log is read back
	// through the kubelet.
	k := kubetest.Kubectl{Bin: bins.Kubectl, Kubeconfig: cl.files.AdminKubeconfig}
	start = time.Now()
	if out, err := k.Run(ctx, []byte(kubetest.WebDeployment("web", 1, 0)), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := k.Run(ctx, nil, "wait", "--for=condition=Available", "deployment/web", "--timeout=90s"); err != nil {
		t.Fatalf("%v\n%s\nkubelet log ends:\n%s", err, out, w.Kubelet.Tail(3000))
	}
	out, err := k.Run(ctx, nil, "logs", "deployment/web")
	if err != nil || !strings.Contains(string(out), "on w-1") {
		t.Fatalf("the pod's log: %v\n%s", err, out)
	}
	t.Logf("a pod of %s ran %s after its apply: %s", kubetest.WebImage, time.Since(start).Round(time.Millisecond), strings.TrimSpace(string(out)))
}
