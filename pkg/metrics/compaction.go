package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Compaction holds the coordinator's etcd compaction metrics. The leader
// sets the last compaction from EtcdCluster.status.compaction on each pass
// of its compaction controller, so a new leader exports its predecessor's.
type Compaction struct {
	revision  prometheus.Gauge
	compacted prometheus.Gauge
	at        prometheus.Gauge
	total     prometheus.Counter
	failures  prometheus.Counter
}

func newCompaction(r *Registry) *Compaction {
	c := &Compaction{
		revision:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "nico_etcd_revision", Help: "The etcd store's revision, as the leader's compaction controller last read it."}),
		compacted: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nico_etcd_compacted_revision", Help: "The revision nico last compacted its etcd to (0: none known); nico_etcd_revision minus it is the history kept."}),
		at:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "nico_etcd_compaction_timestamp_seconds", Help: "Unix time of nico's last compaction of its etcd (0: none known)."}),
		total:     prometheus.NewCounter(prometheus.CounterOpts{Name: "nico_etcd_compactions_total", Help: "Compactions of nico's etcd this leader made."}),
		failures:  prometheus.NewCounter(prometheus.CounterOpts{Name: "nico_etcd_compaction_failures_total", Help: "Compactions of nico's etcd this leader tried and etcd refused or did not answer."}),
	}
	r.MustRegister(c.revision, c.compacted, c.at, c.total, c.failures)
	return c
}

// Observe records the store's revision and the last compaction (revision
// and time; 0 and zero when none is known).
func (c *Compaction) Observe(revision, compacted int64, at time.Time) {
	if c == nil {
		return
	}
	c.revision.Set(float64(revision))
	c.compacted.Set(float64(compacted))
	if at.IsZero() {
		c.at.Set(0)
	} else {
		c.at.Set(float64(at.Unix()))
	}
}

// Compacted counts a compaction.
func (c *Compaction) Compacted() {
	if c != nil {
		c.total.Inc()
	}
}

// Failed counts a failed compaction.
func (c *Compaction) Failed() {
	if c != nil {
		c.failures.Inc()
	}
}
