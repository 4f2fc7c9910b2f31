package metrics

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"

	"github.com/homystack/nico/pkg/controller"
	"github.com/prometheus/client_golang/prometheus"
)

// healthCollector exports a controller runtime's Health on each scrape.
type healthCollector struct {
	health                                       func() []controller.Health
	restarts, reconciles, failures, lastOK, runs *prometheus.Desc
}

// ControllerHealth returns a collector of the controllers' records that
// health returns (controller.Runtime.Health), labelled with the controller's
// name; program ("agent", "coordinator") tells two runtimes apart.
func ControllerHealth(program string, health func() []controller.Health) prometheus.Collector {
	cl := prometheus.Labels{"program": program}
	l := []string{"controller"}
	return &healthCollector{
		health:     health,
		restarts:   prometheus.NewDesc("nico_controller_restarts_total", "Restarts of a controller after a failed start or a panic.", l, cl),
		reconciles: prometheus.NewDesc("nico_controller_reconciles_total", "Reconciles a controller ran.", l, cl),
		failures:   prometheus.NewDesc("nico_controller_consecutive_failures", "A controller's failed reconciles since its last success.", l, cl),
		lastOK:     prometheus.NewDesc("nico_controller_last_success_timestamp_seconds", "When a controller's reconcile last succeeded (Unix seconds; 0: never).", l, cl),
		runs:       prometheus.NewDesc("nico_controller_running", "1 while a controller's group runs (a leader controller stops when leadership ends).", l, cl),
	}
}

// Describe implements prometheus.Collector.
func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.restarts, c.reconciles, c.failures, c.lastOK, c.runs} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	for _, h := range c.health() {
		last := 0.0
		if !h.LastSuccess.IsZero() {
			last = float64(h.LastSuccess.UnixNano()) / 1e9
		}
		running := 0.0
		if h.Running {
			running = 1
		}
		ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(h.Restarts), h.Name)
		ch <- prometheus.MustNewConstMetric(c.reconciles, prometheus.CounterValue, float64(h.Reconciles), h.Name)
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.GaugeValue, float64(h.Failures), h.Name)
		ch <- prometheus.MustNewConstMetric(c.lastOK, prometheus.GaugeValue, last, h.Name)
		ch <- prometheus.MustNewConstMetric(c.runs, prometheus.GaugeValue, running, h.Name)
	}
}

// GossipSource is what the gossip collector reads (gossip.Mesh).
type GossipSource interface {
	// StateCounts counts the peers known, this member included, by state.
	StateCounts() map[string]int
	// ProbeFailures counts this member's failed probes of its peers.
	ProbeFailures() uint64
}

// gossipCollector exports a mesh member's view on each scrape.
type gossipCollector struct {
	src             func() GossipSource
	members, probes *prometheus.Desc
}

// Gossip returns a collector of the gossip mesh member src returns (nil:
// none yet, nothing exported), labelled with program.
func Gossip(program string, src func() GossipSource) prometheus.Collector {
	cl := prometheus.Labels{"program": program}
	return &gossipCollector{
		src:     src,
		members: prometheus.NewDesc("nico_gossip_members", "Gossip mesh members this member knows of, by state (alive, suspect, dead, left).", []string{"state"}, cl),
		probes:  prometheus.NewDesc("nico_gossip_probe_failures_total", "This member's probes of a peer that failed (the peer became suspect).", nil, cl),
	}
}

// Describe implements prometheus.Collector.
func (c *gossipCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.members; ch <- c.probes }

// Collect implements prometheus.Collector.
func (c *gossipCollector) Collect(ch chan<- prometheus.Metric) {
	src := c.src()
	if src == nil {
		return
	}
	for state, n := range src.StateCounts() {
		ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(n), state)
	}
	ch <- prometheus.MustNewConstMetric(c.probes, prometheus.CounterValue, float64(src.ProbeFailures()))
}

// certCollector exports the expiry of the certificates in a directory.
type certCollector struct {
	dir    string
	expiry *prometheus.Desc
}

// CertExpiry returns a collector of the NotAfter of every *.crt file in
// dir (the machine's pki.dir), read on each scrape, labelled with the
// file's name; files that do not parse are skipped.
func CertExpiry(dir string) prometheus.Collector {
	return &certCollector{dir: dir, expiry: prometheus.NewDesc("nico_certificate_expiry_timestamp_seconds",
		"When a certificate in the machine's PKI directory expires (Unix seconds).", []string{"file"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *certCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.expiry }

// Collect implements prometheus.Collector.
func (c *certCollector) Collect(ch chan<- prometheus.Metric) {
	files, _ := filepath.Glob(filepath.Join(c.dir, "*.crt"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		b, _ := pem.Decode(data)
		if b == nil {
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.expiry, prometheus.GaugeValue, float64(cert.NotAfter.Unix()), filepath.Base(f))
	}
}
