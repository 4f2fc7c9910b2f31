package snapshot

import (
	"fmt"
	"testing"
	"time"
)

func TestPlanPrune(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	// s0 is the oldest, s4 the newest, one hour apart.
	var ms []Meta
	for i := range 5 {
		ms = append(ms, Meta{Name: fmt.Sprintf("s%d", i), TakenAt: t0.Add(time.Duration(i) * time.Hour)})
	}
	now := t0.Add(4 * time.Hour)
	cases := []struct {
		name string
		r    Retention
		now  time.Time
		want string
	}{
		{"keep everything", Retention{}, now, "[]"},
		{"keep 2", Retention{Keep: 2}, now, "[s2 s1 s0]"},
		{"keep more than there are", Retention{Keep: 9}, now, "[]"},
		{"max age 2h", Retention{MaxAge: 2 * time.Hour}, now, "[s1 s0]"},
		{"both: the stricter wins", Retention{Keep: 4, MaxAge: 90 * time.Minute}, now, "[s2 s1 s0]"},
		{"all too old: the newest stays", Retention{MaxAge: time.Hour}, now.Add(24 * time.Hour), "[s3 s2 s1 s0]"},
	}
	for _, c := range cases {
		got := PlanPrune(ms, c.r, c.now)
		if fmt.Sprint(got) != c.want && !(c.want == "[]" && len(got) == 0) {
			t.Errorf("%s: PlanPrune = %v, want %s", c.name, got, c.want)
		}
	}
}
