package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestSnapshotAgeIsComputedAtScrape(t *testing.T) {
	reg := NewRegistry()
	c := NewCoordinator(reg)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c.Snapshots.SetClock(func() time.Time { return now })
	if n, err := testutil.GatherAndCount(reg.Gatherer(), "nico_etcd_snapshot_age_seconds"); err != nil || n != 0 {
		t.Fatalf("age before any snapshot: %d series, %v; want none", n, err)
	}
	c.Snapshots.Observe(now.Add(-90*time.Second), 4128, time.Hour)
	c.Snapshots.Taken(TriggerScheduled)
	c.Snapshots.Failed(TriggerBeforeChange)
	now = now.Add(10 * time.Second)
	want := `
# HELP nico_etcd_snapshot_age_seconds Time since the newest stored etcd snapshot was taken; absent until one is known.
# TYPE nico_etcd_snapshot_age_seconds gauge
nico_etcd_snapshot_age_seconds 100
# HELP nico_etcd_snapshot_interval_seconds The EtcdCluster's spec.snapshots.interval (0: none scheduled).
# TYPE nico_etcd_snapshot_interval_seconds gauge
nico_etcd_snapshot_interval_seconds 3600
# HELP nico_etcd_snapshot_last_size_bytes Size of the newest stored etcd snapshot, sha256 trailer included.
# TYPE nico_etcd_snapshot_last_size_bytes gauge
nico_etcd_snapshot_last_size_bytes 4128
# HELP nico_etcd_snapshot_failures_total etcd snapshots this leader failed to take, check or store, by trigger.
# TYPE nico_etcd_snapshot_failures_total counter
nico_etcd_snapshot_failures_total{trigger="before_change"} 1
`
	if err := testutil.GatherAndCompare(reg.Gatherer(), strings.NewReader(want), "nico_etcd_snapshot_age_seconds", "nico_etcd_snapshot_interval_seconds",
		"nico_etcd_snapshot_last_size_bytes", "nico_etcd_snapshot_failures_total"); err != nil {
		t.Fatal(err)
	}
}
