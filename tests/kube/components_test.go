package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/kubetest"
)

// TestAPIServerExtraArgsReachTheRunningAPIServer: a Ready cluster's
// spec.controlPlane.components.apiServer.extraArgs change
// (--cors-allowed-origins) rolls a new cluster.nix to the control-plane
// machine, whose generation restarts the real kube-apiserver with it: the
// running API server then answers a request from that origin with its
// CORS header, which it did not before.
func TestAPIServerExtraArgsReachTheRunningAPIServer(t *testing.T) {
	kubetest.FindBinaries(t)
	f := newFleet(t, fleetOptions{cps: 1, clusters: true})
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	kc := api.NewKubernetesCluster("k1")
	kc.Spec.GitRepo, kc.Spec.Version = "https://git.example/kube", "1.37.2"
	kc.Spec.ControlPlane.Machines = []string{"cp-1"}
	kc.Spec.Probes.Interval = api.Duration(time.Second)
	kc.Spec.Rollout.StepTimeout = api.Duration(3 * time.Minute)
	if err := kc.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := f.st.PutObject(ctx, kc); err != nil {
		t.Fatal(err)
	}
	_, kc = f.waitCluster(t, ctx, "k1", 6*time.Minute, "Ready", func(kc *api.KubernetesCluster) bool { return kc.Status.Phase == api.ClusterReady })

	const origin = "https://console.example.org"
	cp1 := f.machines["cp-1"]
	caPEM, err := os.ReadFile(cp1.Path("/etc/kubernetes/pki/ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("no certificate in the delivered cluster CA")
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	// allowed returns the API server's CORS answer to origin, "" when none.
	allowed := func() (string, error) {
		cp := cp1.ControlPlane()
		if cp == nil {
			return "", nil
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cp.URL+"/readyz", nil)
		if err != nil {
			return "", err
		}
		req.Header.Set("Origin", origin)
		resp, err := client.Do(req)
		if err != nil {
			return "", nil // restarting
		}
		resp.Body.Close()
		return resp.Header.Get("Access-Control-Allow-Origin"), nil
	}
	if got, err := allowed(); err != nil || got != "" {
		t.Fatalf("before the change the API server allows %q (%v), want no CORS answer", got, err)
	}

	want := kc.Metadata.Generation + 1 // the change's (status writes keep the generation)
	f.changeCluster(t, ctx, "k1", func(kc *api.KubernetesCluster) {
		kc.Spec.ControlPlane.Components.APIServer.ExtraArgs = map[string]string{"cors-allowed-origins": `^https://console\.example\.org$`}
	})
	testwait.True(t, 4*time.Minute, "the running API server answers "+origin+" with its CORS header", func() bool {
		got, err := allowed()
		if err != nil {
			t.Fatal(err)
		}
		return got == origin
	})
	f.waitCluster(t, ctx, "k1", 3*time.Minute, "Ready at the new generation", func(c *api.KubernetesCluster) bool {
		return c.Status.Phase == api.ClusterReady && c.Status.ObservedGeneration == want
	})
}

// TestRealAPIServerNotReadyHaltsTheRollout: a control-plane generation whose
// API server runs but is never ready (extraArgs
// --etcd-readycheck-timeout=1ns: /livez answers, /readyz fails its
// etcd-readiness check) halts the cluster's rollout at cp-1 once the step
// timeout passes, naming the machine, and the cluster's status names it.
func TestRealAPIServerNotReadyHaltsTheRollout(t *testing.T) {
	kubetest.FindBinaries(t)
	f := newFleet(t, fleetOptions{cps: 1, clusters: true})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	kc := workerClusterSpec(t, []string{"cp-1"}, nil)
	if err := f.st.PutObject(ctx, kc); err != nil {
		t.Fatal(err)
	}
	f.waitCluster(t, ctx, "k1", 3*time.Minute, "Ready", func(kc *api.KubernetesCluster) bool { return kc.Status.Phase == api.ClusterReady })

	// The short step timeout only for the broken generation's rollout:
	// the first API server's start on a loaded machine may take longer.
	// It leaves the restarted API server time to be probed, so that the
	// halt names its readiness, not a missing report.
	f.changeCluster(t, ctx, "k1", func(kc *api.KubernetesCluster) {
		kc.Spec.ControlPlane.Components.APIServer.ExtraArgs = map[string]string{"etcd-readycheck-timeout": "1ns"}
		kc.Spec.Rollout.StepTimeout = api.Duration(45 * time.Second)
	})
	halted := f.waitHalted(t, ctx, 2*time.Minute, func(*api.Rollout) bool { return true })
	t.Logf("rollout %s halted at %s: %s", halted.Metadata.Name, halted.Status.HaltedNode, halted.Status.HaltedReason)
	if halted.Status.HaltedNode != "cp-1" || !strings.Contains(halted.Status.HaltedReason, "cp-1") || !strings.Contains(halted.Status.HaltedReason, "etcd-readiness failed") {
		t.Errorf("halted at %q (%q), want cp-1 named, its API server's etcd-readiness failed", halted.Status.HaltedNode, halted.Status.HaltedReason)
	}
	if cp := f.machines["cp-1"].ControlPlane(); cp == nil || cp.APIServer == nil {
		t.Error("cp-1 runs no API server: the generation failed, not its readiness")
	}
	f.waitCluster(t, ctx, "k1", time.Minute, "the cluster naming cp-1", func(kc *api.KubernetesCluster) bool {
		return strings.Contains(kc.Status.Message, "cp-1")
	})
}
