package kubeprobe

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/agent/internal/kubeprobe/kubeprobetest"
	"github.com/homystack/nico/pkg/api"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestProbeHealth(t *testing.T) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "[-]etcd failed: reason withheld", http.StatusInternalServerError)
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		// Never answers: when the client gives up, the handler aborts the
		// connection rather than return. Returning would write a 200, and
		// the client can read it: its cancellation sends TLS close_notify
		// (the server's request context ends) before it closes the socket,
		// and net/http's transport uses a response that raced its
		// cancellation. That made this case pass as healthy once in a
		// loaded make test.
		select {
		case <-r.Context().Done():
			panic(http.ErrAbortHandler)
		case <-release:
		}
	})
	s := kubeprobetest.NewServer(t, mux)
	other := kubeprobetest.NewServer(t, mux) // another cluster's CA
	t.Cleanup(func() { close(release) })
	tests := []struct {
		name    string
		target  Target
		healthy bool
		message string
	}{
		{"verified with the cluster CA", Target{Name: api.ComponentAPIServer, URL: s.URL + "/readyz", CA: s.CAPEM}, true, ""},
		{"a wrong CA", Target{Name: api.ComponentAPIServer, URL: s.URL + "/readyz", CA: other.CAPEM}, false, "certificate signed by unknown authority"},
		{"500", Target{Name: api.ComponentAPIServer, URL: s.URL + "/broken", CA: s.CAPEM}, false, "500 Internal Server Error: [-]etcd failed"},
		{"timeout", Target{Name: api.ComponentAPIServer, URL: s.URL + "/hang", CA: s.CAPEM}, false, "deadline exceeded"},
		{"nothing listening", Target{Name: api.ComponentScheduler, URL: "https://127.0.0.1:1/healthz"}, false, "connection refused"},
		{"own certificate accepted without a CA", Target{Name: api.ComponentScheduler, URL: s.URL + "/readyz"}, true, ""},
		{"a CA file with no certificate", Target{Name: api.ComponentAPIServer, URL: s.URL + "/readyz", CA: []byte("junk")}, false, ErrBadCA.Error()},
	}
	p := &Prober{Timeout: 500 * time.Millisecond}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := p.Probe(t.Context(), tt.target)
			if h.Healthy != tt.healthy || !strings.Contains(h.Message, tt.message) || h.Name != tt.target.Name {
				t.Fatalf("got %+v, want healthy=%v message ~ %q", h, tt.healthy, tt.message)
			}
		})
	}
}

// TestProbeLeases: the leader lease is read through the API server with
// the kubeconfig's client certificate and CA; the holder is matched to
// this machine's identities; a lease without a holder, or that cannot be
// read, makes the component unhealthy.
func TestProbeLeases(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc(kubeprobetest.LeasesPath, kubeprobetest.Leases(map[string]string{
		"kube-scheduler": "cp-1_5b1c7c8e-2f5e-4a6a-9d0e-000000000001", "kube-controller-manager": "cp-2_0000", "vacant": "",
	}))
	s := kubeprobetest.NewServer(t, mux)
	kc := s.Kubeconfig(t, "https://k1.example.org:6443")
	leases, err := LeasesFromKubeconfig(kc, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer leases.Close()
	p := &Prober{Timeout: 2 * time.Second, Leases: leases, Identities: []string{"cp-1"}}
	probe := func(lease string) api.ComponentHealth {
		return p.Probe(t.Context(), Target{Name: api.ComponentScheduler, URL: s.URL + "/healthz", CA: s.CAPEM, Lease: lease})
	}
	if h := probe("kube-system/kube-scheduler"); !h.Healthy || !h.HoldsLease || !strings.HasPrefix(h.LeaderHolder, "cp-1_") {
		t.Errorf("scheduler: %+v, want healthy, held here", h)
	}
	if h := probe("kube-system/kube-controller-manager"); !h.Healthy || h.HoldsLease || h.LeaderHolder != "cp-2_0000" {
		t.Errorf("controller-manager: %+v, want healthy, held by cp-2", h)
	}
	if h := probe("kube-system/vacant"); h.Healthy || !strings.Contains(h.Message, "no holder") {
		t.Errorf("vacant: %+v", h)
	}
	if h := probe("kube-system/missing"); h.Healthy || !strings.Contains(h.Message, "404") {
		t.Errorf("missing: %+v", h)
	}
	if h := probe("no-slash"); h.Healthy || !strings.Contains(h.Message, "namespace/name") {
		t.Errorf("bad lease name: %+v", h)
	}
	anon := &Prober{Leases: &APILeases{Server: s.URL, Client: s.Client()}}
	if h := anon.Probe(t.Context(), Target{Name: api.ComponentScheduler, URL: s.URL + "/healthz", CA: s.CAPEM, Lease: "kube-system/kube-scheduler"}); h.Healthy || !strings.Contains(h.Message, "401") {
		t.Errorf("without a credential: %+v", h)
	}
}

func TestTargets(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("CA"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts, err := Targets(api.ClusterProbes{Scheduler: &api.ComponentProbe{Disabled: true}}, ca, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Name != api.ComponentAPIServer || string(ts[0].CA) != "CA" || ts[0].Lease != "" ||
		ts[1].Name != api.ComponentControllerManager || ts[1].CA != nil || ts[1].Lease != "kube-system/kube-controller-manager" {
		t.Fatalf("targets %+v", ts)
	}
	if _, err := Targets(api.ClusterProbes{}, filepath.Join(dir, "none.crt"), os.ReadFile); err == nil || !strings.Contains(err.Error(), "none.crt") {
		t.Fatalf("missing CA: %v", err)
	}
}
