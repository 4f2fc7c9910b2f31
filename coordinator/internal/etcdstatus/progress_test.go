package etcdstatus

import (
	"testing"
	"time"
)

func TestEstimate(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name    string
		samples []Sample
		want    Progress
		ok      bool
	}{
		{"no sample", nil, Progress{}, false},
		{"leader unknown", []Sample{{At: at(0), Learner: 10}}, Progress{}, false},
		{"one sample: fraction, no rate", []Sample{{At: at(0), Learner: 250, Leader: 1000}}, Progress{Fraction: 0.25}, true},
		{"closing at 100/s with 500 left", []Sample{{At: at(0), Learner: 100, Leader: 1000}, {At: at(4), Learner: 500, Leader: 1000}}, Progress{Fraction: 0.5, ETA: 5 * time.Second}, true},
		{"leader moving too: the gap's rate counts", []Sample{{At: at(0), Learner: 0, Leader: 1000}, {At: at(1), Learner: 300, Leader: 1100}, {At: at(2), Learner: 600, Leader: 1200}}, Progress{Fraction: 0.5, ETA: 3 * time.Second}, true},
		{"falling behind: no ETA", []Sample{{At: at(0), Learner: 100, Leader: 200}, {At: at(1), Learner: 150, Leader: 400}}, Progress{Fraction: 0.375}, true},
		{"caught up", []Sample{{At: at(0), Learner: 100, Leader: 200}, {At: at(1), Learner: 210, Leader: 210}}, Progress{Fraction: 1}, true},
		{"ahead of a stale leader read", []Sample{{At: at(0), Learner: 220, Leader: 210}}, Progress{Fraction: 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Estimate(tc.samples)
			if got != tc.want || ok != tc.ok {
				t.Errorf("Estimate = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestHistory(t *testing.T) {
	h := History[int]{Window: 10 * time.Second, Max: 3}
	for i := 0; i < 5; i++ {
		h.Add(1, Sample{At: t0.Add(time.Duration(i) * time.Second), Learner: uint64(i)})
	}
	if ss := h.Add(1, Sample{At: t0.Add(5 * time.Second), Learner: 5}); len(ss) != 3 || ss[0].Learner != 3 {
		t.Errorf("max: %+v", ss)
	}
	if ss := h.Add(1, Sample{At: t0.Add(time.Minute), Learner: 6}); len(ss) != 1 {
		t.Errorf("window: %+v", ss)
	}
	h.Add(2, Sample{At: t0})
	h.Retain(func(k int) bool { return k == 2 })
	if ss := h.Add(1, Sample{At: t0}); len(ss) != 1 {
		t.Errorf("retain kept key 1: %+v", ss)
	}
}
