package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/metrics/metricstest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/testwait"
)

// TestMetricsEndpointFollowsLeadership: nico-coordinator serves /metrics
// on its metrics.listen; once elected its nico_coordinator_is_leader is 1,
// its leader changes count it, the membership controller reports a
// success and the cluster gauges show the one voter; after SIGTERM (it
// resigns) the endpoint is gone.
func TestMetricsEndpointFollowsLeadership(t *testing.T) {
	cl := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: true})
	id := etcdtest.IssueFiles(t, filepath.Join(t.TempDir(), "pki"), pki.Request{CommonName: pki.CoordinatorIdentity, Usage: pki.UsageClient})
	addr := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	url := "http://" + addr + "/metrics"
	var out logging.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"--name", "c-1", "--etcd.endpoints", cl.Endpoints()[0], "--metrics.listen", addr,
			"--tls.caFile", id.CA, "--tls.certFile", id.Cert, "--tls.keyFile", id.Key}, &out)
	}()
	var mfs metricstest.Families
	testwait.For(t, 30*time.Second, "the elected candidate's metrics", func() (bool, string) {
		var err error
		if mfs, err = metricstest.Scrape(nil, url); err != nil {
			return false, err.Error()
		}
		leader, _ := mfs.Value("nico_coordinator_is_leader")
		changes, _ := mfs.Value("nico_coordinator_leader_changes_total")
		voters, _ := mfs.Value("nico_etcd_members", "role", "voter")
		ok, _ := mfs.Value("nico_controller_last_success_timestamp_seconds", "controller", "membership")
		return leader == 1 && changes >= 1 && voters == 1 && ok > 0,
			fmt.Sprintf("is_leader %v, leader changes %v, voters %v, membership last success %v", leader, changes, voters, ok)
	})
	crt := filepath.Base(id.Cert)
	if v, ok := mfs.Value("nico_certificate_expiry_timestamp_seconds", "file", crt); !ok || v < float64(time.Now().Unix()) {
		t.Errorf("%s expiry %v (%v), want in the future", crt, v, ok)
	}
	if _, ok := mfs.Value("go_goroutines"); !ok {
		t.Error("no go_goroutines: the Go collector is not registered")
	}
	stopCoordinator(t, code, &out)
	if _, err := metricstest.Scrape(nil, url); err == nil {
		t.Error("/metrics still answers after the coordinator stopped")
	}
}
