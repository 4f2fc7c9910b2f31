package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/testwait"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads url's /metrics as metric families.
func scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// value is the value of the one sample of name whose labels include
// labels (name=value pairs), and whether there is one.
func value(mfs map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

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
	var mfs map[string]*dto.MetricFamily
	testwait.For(t, 30*time.Second, "the elected candidate's metrics", func() (bool, string) {
		var err error
		if mfs, err = scrape(url); err != nil {
			return false, err.Error()
		}
		leader, _ := value(mfs, "nico_coordinator_is_leader")
		changes, _ := value(mfs, "nico_coordinator_leader_changes_total")
		voters, _ := value(mfs, "nico_etcd_members", "role", "voter")
		ok, _ := value(mfs, "nico_controller_last_success_timestamp_seconds", "controller", "membership")
		return leader == 1 && changes >= 1 && voters == 1 && ok > 0,
			fmt.Sprintf("is_leader %v, leader changes %v, voters %v, membership last success %v", leader, changes, voters, ok)
	})
	crt := filepath.Base(id.Cert)
	if v, ok := value(mfs, "nico_certificate_expiry_timestamp_seconds", "file", crt); !ok || v < float64(time.Now().Unix()) {
		t.Errorf("%s expiry %v (%v), want in the future", crt, v, ok)
	}
	if _, ok := value(mfs, "go_goroutines"); !ok {
		t.Error("no go_goroutines: the Go collector is not registered")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d after SIGTERM, want 0:\n%s", c, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("nico-coordinator did not stop on SIGTERM:\n%s", out.String())
	}
	if _, err := scrape(url); err == nil {
		t.Error("/metrics still answers after the coordinator stopped")
	}
}
