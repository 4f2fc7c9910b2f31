package api

import (
	"testing"
	"time"
)

// TestComponentReportFresh: a report is fresh for its own cluster until
// FreshUntil, or, written without it, for three probe intervals after its
// round.
func TestComponentReportFresh(t *testing.T) {
	at := time.Unix(1_700_000_000, 0).UTC()
	const interval = 10 * time.Second
	report := func(cluster string, until time.Time) *ComponentReport {
		r := NewComponentReport("cp-1")
		r.Status.Cluster, r.Status.CheckedAt, r.Status.FreshUntil = cluster, at, until
		return r
	}
	for _, tc := range []struct {
		name string
		r    *ComponentReport
		now  time.Time
		want bool
	}{
		{"none", nil, at, false},
		{"another cluster's", report("k2", at.Add(time.Hour)), at, false},
		{"before fresh-until", report("k1", at.Add(5*time.Minute)), at.Add(5 * time.Minute), true},
		{"after fresh-until", report("k1", at.Add(5*time.Minute)), at.Add(5*time.Minute + time.Nanosecond), false},
		{"fresh-until beyond three intervals", report("k1", at.Add(5*time.Minute)), at.Add(4 * interval), true},
		{"no fresh-until, three intervals", report("k1", time.Time{}), at.Add(3 * interval), true},
		{"no fresh-until, past three intervals", report("k1", time.Time{}), at.Add(3*interval + time.Second), false},
	} {
		if got := tc.r.Fresh("k1", tc.now, interval); got != tc.want {
			t.Errorf("%s: fresh %v, want %v", tc.name, got, tc.want)
		}
	}
}
