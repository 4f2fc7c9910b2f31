package compaction

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func at(min int, rev int64) Sample {
	return Sample{At: t0.Add(time.Duration(min) * time.Minute), Revision: rev}
}

func TestPlan(t *testing.T) {
	hour := Policy{Retention: time.Hour}
	samples := []Sample{at(0, 100), at(30, 200), at(50, 300)}
	for _, tc := range []struct {
		name   string
		o      Observed
		p      Policy
		want   int64 // 0: no compaction
		reason string
	}{
		{"no sample an hour old yet", Observed{Now: t0.Add(59 * time.Minute), Revision: 400, Samples: samples}, hour, 0, "no revision seen 1h0m0s ago"},
		{"the newest sample an hour old", Observed{Now: t0.Add(60 * time.Minute), Revision: 400, Samples: samples}, hour, 100, ""},
		{"later: the newest sample past the window", Observed{Now: t0.Add(95 * time.Minute), Revision: 400, Samples: samples}, hour, 200, ""},
		{"the default retention is an hour", Observed{Now: t0.Add(95 * time.Minute), Revision: 400, Samples: samples}, Policy{}, 200, ""},
		{"minRevisions keeps more", Observed{Now: t0.Add(95 * time.Minute), Revision: 400, Samples: samples}, Policy{Retention: time.Hour, MinRevisions: 250}, 150, ""},
		{"minRevisions beyond the whole history", Observed{Now: t0.Add(95 * time.Minute), Revision: 400, Samples: samples}, Policy{Retention: time.Hour, MinRevisions: 1000}, 0, "compacted already"},
		{"compacted there already", Observed{Now: t0.Add(95 * time.Minute), Revision: 400, Compacted: 200, Samples: samples}, hour, 0, "compacted already"},
		{"within the interval of the last", Observed{Now: t0.Add(95 * time.Minute), Revision: 400, Compacted: 100, CompactedAt: t0.Add(90 * time.Minute), Samples: samples}, hour, 0, "less than the interval 6m0s"},
		{"past the interval of the last", Observed{Now: t0.Add(96 * time.Minute), Revision: 400, Compacted: 100, CompactedAt: t0.Add(90 * time.Minute), Samples: samples}, hour, 200, ""},
		{"never while a restore runs", Observed{Now: t0.Add(95 * time.Minute), Revision: 400, Blocked: "restore r-1", Samples: samples}, hour, 0, "not while restore r-1"},
		{"no samples (a new leader)", Observed{Now: t0.Add(95 * time.Minute), Revision: 400}, hour, 0, "no revision seen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.o, tc.p)
			if d.Compact != (tc.want != 0) || d.Revision != tc.want {
				t.Fatalf("Plan = %+v, want revision %d", d, tc.want)
			}
			if tc.reason != "" && !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("reason %q, want it to contain %q", d.Reason, tc.reason)
			}
		})
	}
}

func TestHistory(t *testing.T) {
	p := Policy{Retention: time.Hour} // a sample per 36 s at most
	var h History
	h.Add(at(0, 10), p)
	h.Add(Sample{At: t0.Add(10 * time.Second), Revision: 20}, p) // too soon
	h.Add(at(1, 10), p)                                          // idle: no new revision
	h.Add(at(2, 30), p)
	if got := h.Samples(); len(got) != 2 || got[0] != at(0, 10) || got[1] != at(2, 30) {
		t.Fatalf("samples %v", got)
	}
	for m := 3; m <= 130; m++ {
		h.Add(at(m, int64(30+m)), p)
	}
	got := h.Samples()
	// Kept: the newest sample at or before 130-60 = minute 70, and after.
	if got[0] != at(70, 100) || got[len(got)-1] != at(130, 160) || len(got) != 61 {
		t.Fatalf("samples from %v to %v (%d), want minute 70 to 130 (61)", got[0], got[len(got)-1], len(got))
	}
}
