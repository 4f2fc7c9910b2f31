package kubeapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestDrainCalls: DrainPods lists the node's pods but DaemonSet pods,
// mirrors and finished pods, marking those being deleted; Evict posts a
// policy/v1 Eviction and maps a disruption budget's 429 to
// ErrTooManyRequests and a pod gone to no error; Cordon merge-patches
// spec.unschedulable.
func TestDrainCalls(t *testing.T) {
	var seen []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen = append(seen, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Content-Type")+" "+string(body))
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/v1/pods":
			if got := r.URL.Query().Get("fieldSelector"); got != "spec.nodeName=dp-1" {
				t.Errorf("fieldSelector %q", got)
			}
			io.WriteString(w, `{"items": [
				{"metadata": {"namespace": "default", "name": "web-1"}, "status": {"phase": "Running"}},
				{"metadata": {"namespace": "default", "name": "web-2", "deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Running"}},
				{"metadata": {"namespace": "kube-system", "name": "proxy", "ownerReferences": [{"kind": "DaemonSet", "controller": true}]}, "status": {"phase": "Running"}},
				{"metadata": {"namespace": "kube-system", "name": "static", "annotations": {"kubernetes.io/config.mirror": "x"}}, "status": {"phase": "Running"}},
				{"metadata": {"namespace": "default", "name": "job-1"}, "status": {"phase": "Succeeded"}}]}`)
		case strings.HasSuffix(r.URL.Path, "/web-1/eviction"):
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"kind": "Status", "message": "Cannot evict pod as it would violate the pod's disruption budget."}`)
		case strings.HasSuffix(r.URL.Path, "/gone/eviction"):
			w.WriteHeader(http.StatusNotFound)
		default:
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{}`)
		}
	}))
	defer srv.Close()
	c := &Client{Server: srv.URL, HTTP: srv.Client(), Token: "t"}
	ctx := t.Context()
	pods, err := c.DrainPods(ctx, "dp-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := []Pod{{"default", "web-1", false}, {"default", "web-2", true}}; !slices.Equal(pods, want) {
		t.Fatalf("DrainPods %+v, want %+v", pods, want)
	}
	err = c.Evict(ctx, pods[0])
	if !errors.Is(err, ErrTooManyRequests) || !strings.Contains(err.Error(), "disruption budget") {
		t.Fatalf("refused eviction: %v", err)
	}
	if err := c.Evict(ctx, Pod{Namespace: "default", Name: "gone"}); err != nil {
		t.Fatalf("eviction of a pod gone: %v", err)
	}
	if err := c.Cordon(ctx, "dp-1", true); err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	post := seen[1][strings.Index(seen[1], "{"):]
	if err := json.Unmarshal([]byte(post), &ev); err != nil || ev["kind"] != "Eviction" || ev["apiVersion"] != "policy/v1" {
		t.Fatalf("eviction body %s: %v", post, err)
	}
	if last := seen[len(seen)-1]; last != `PATCH /api/v1/nodes/dp-1 application/merge-patch+json {"metadata":{"annotations":{"nico.homystack.io/cordoned":"true"}},"spec":{"unschedulable":true}}` {
		t.Fatalf("cordon: %s", last)
	}
}
