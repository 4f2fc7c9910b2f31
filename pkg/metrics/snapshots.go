package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Snapshot triggers, the trigger label of the snapshot counters.
const (
	TriggerScheduled    = "scheduled"
	TriggerBeforeChange = "before_change"
	TriggerOnDemand     = "on_demand"
)

// Snapshots holds the coordinator's etcd snapshot metrics. The leader
// sets the last snapshot from EtcdCluster.status.snapshots on each pass
// of its snapshot controller, so a new leader exports the age its
// predecessor's snapshot has; the age is computed at scrape time.
type Snapshots struct {
	now      func() time.Time
	taken    *prometheus.CounterVec
	failures *prometheus.CounterVec
	size     prometheus.Gauge
	interval prometheus.Gauge
	ageDesc  *prometheus.Desc

	mu   sync.Mutex
	last time.Time
}

func newSnapshots(r *Registry) *Snapshots {
	s := &Snapshots{
		now:      time.Now,
		taken:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nico_etcd_snapshots_total", Help: "etcd snapshots this leader took and stored, by trigger (scheduled, before_change, on_demand)."}, []string{"trigger"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nico_etcd_snapshot_failures_total", Help: "etcd snapshots this leader failed to take, check or store, by trigger."}, []string{"trigger"}),
		size:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "nico_etcd_snapshot_last_size_bytes", Help: "Size of the newest stored etcd snapshot, sha256 trailer included."}),
		interval: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nico_etcd_snapshot_interval_seconds", Help: "The EtcdCluster's spec.snapshots.interval (0: none scheduled)."}),
		ageDesc:  prometheus.NewDesc("nico_etcd_snapshot_age_seconds", "Time since the newest stored etcd snapshot was taken; absent until one is known.", nil, nil),
	}
	r.MustRegister(s.taken, s.failures, s.size, s.interval, s)
	return s
}

// Describe implements prometheus.Collector (the age gauge).
func (s *Snapshots) Describe(ch chan<- *prometheus.Desc) { ch <- s.ageDesc }

// Collect implements prometheus.Collector: the age, once a snapshot is
// known.
func (s *Snapshots) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	last, now := s.last, s.now()
	s.mu.Unlock()
	if last.IsZero() {
		return
	}
	ch <- prometheus.MustNewConstMetric(s.ageDesc, prometheus.GaugeValue, max(now.Sub(last).Seconds(), 0))
}

// SetClock replaces the clock the age is computed with (tests).
func (s *Snapshots) SetClock(now func() time.Time) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// Observe records the newest stored snapshot (taken at, size in bytes)
// and the spec's interval, as the leader reads them; a zero at leaves the
// age absent.
func (s *Snapshots) Observe(at time.Time, size int64, interval time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.last = at
	s.mu.Unlock()
	s.size.Set(float64(size))
	s.interval.Set(interval.Seconds())
}

// Taken counts a stored snapshot of trigger.
func (s *Snapshots) Taken(trigger string) {
	if s != nil {
		s.taken.WithLabelValues(trigger).Inc()
	}
}

// Failed counts a failed snapshot of trigger.
func (s *Snapshots) Failed(trigger string) {
	if s != nil {
		s.failures.WithLabelValues(trigger).Inc()
	}
}
