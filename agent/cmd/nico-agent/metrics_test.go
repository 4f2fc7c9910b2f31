package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/metrics/metricstest"
	"github.com/homystack/nico/pkg/testwait"
)

// TestAgentServesMetrics: a bootstrap agent serves /metrics on its
// metrics.listen: its controllers' successes, its generation counter at
// zero, its certificates' expiry; it stops serving when it stops.
func TestAgentServesMetrics(t *testing.T) {
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	file := writeBootstrapConfig(t, dir, "", addr)
	var out logging.Buffer
	code := make(chan int, 1)
	go func() { code <- run([]string{"--config", file}, &out) }()
	url := "http://" + addr + "/metrics"
	testwait.For(t, 60*time.Second, "the agent's metrics", func() (bool, string) {
		select {
		case c := <-code:
			t.Fatalf("nico-agent exited %d:\n%s", c, out.String())
		default:
		}
		mfs, err := metricstest.Scrape(nil, url)
		if err != nil {
			return false, err.Error()
		}
		hb, _ := mfs.Value("nico_controller_last_success_timestamp_seconds", "program", "agent", "controller", "heartbeat")
		gens, okGens := mfs.Value("nico_agent_generations_total", "node", "cp-1", "outcome", "applied")
		exp, _ := mfs.Value("nico_certificate_expiry_timestamp_seconds", "file", "ca.crt")
		return hb > 0 && okGens && gens == 0 && exp > float64(time.Now().Unix()),
			fmt.Sprintf("heartbeat last success %v, generations applied %v (%v), ca.crt expiry %v; families %d", hb, gens, okGens, exp, len(mfs))
	})
	stopAgent(t, code, &out)
	if _, err := metricstest.Scrape(nil, url); err == nil {
		t.Error("/metrics still answers after the agent stopped")
	}
}

// TestAgentRefusesMetricsBeyondLoopbackWithoutTLS: metrics.listen on every
// address without metrics.tls.* is a configuration error (exit 2) that
// names what to give.
func TestAgentRefusesMetricsBeyondLoopbackWithoutTLS(t *testing.T) {
	var out logging.Buffer
	c := run([]string{"--name", "cp-1", "--bootstrap", "--dataDir", t.TempDir(), "--metrics.listen", "0.0.0.0:9479"}, &out)
	if c != 2 || !strings.Contains(out.String(), "metrics.tls.certFile") {
		t.Fatalf("exit %d, want 2 naming metrics.tls.certFile:\n%s", c, out.String())
	}
}
