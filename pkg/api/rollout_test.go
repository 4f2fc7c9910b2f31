package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestBatchSize(t *testing.T) {
	for _, c := range []struct {
		v    string
		n    int
		want int
		bad  bool
	}{
		{"", 20, 1, false}, {"3", 20, 3, false}, {"25%", 20, 5, false}, {"10%", 5, 1, false}, {"100%", 7, 7, false},
		{"0", 5, 0, true}, {"-1", 5, 0, true}, {"0%", 5, 0, true}, {"150%", 5, 0, true}, {"two", 5, 0, true},
	} {
		got, err := RolloutSpec{MaxUnavailable: c.v}.BatchSize(c.n)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("BatchSize(%q, %d) = %d, %v", c.v, c.n, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), c.v) {
			t.Errorf("error %v does not name %q", err, c.v)
		}
	}
}

func TestSettledAndAttr(t *testing.T) {
	c := NewNixosConfiguration("m1")
	c.Spec.Generation = 3
	if c.Settled() != GenerationPending {
		t.Fatal("new generation settled")
	}
	c.Status.Generation, c.Status.Phase = 3, GenerationApplying
	if c.Settled() != GenerationPending {
		t.Fatal("applying counts as settled")
	}
	c.Status.Phase = GenerationFailed
	if c.Settled() != GenerationFailed {
		t.Fatal("failed not settled")
	}
	c.Spec.Attempt = 1 // asked to retry
	if c.Settled() != GenerationPending {
		t.Fatal("retry not pending")
	}
	for flake, want := range map[string]string{"": "m1", "#": "m1", "#web": "web", "web": "web"} {
		if got := (NixosConfigurationSpec{Flake: flake}).Attr("m1"); got != want {
			t.Errorf("Attr(%q) = %q", flake, got)
		}
	}
	for i := 0; i < MaxGenerationHistory+3; i++ {
		c.RecordGeneration(GenerationRecord{Generation: int64(i)})
	}
	if len(c.Status.History) != MaxGenerationHistory || c.Status.History[0].Generation != 3 {
		t.Fatalf("history %d, oldest %d", len(c.Status.History), c.Status.History[0].Generation)
	}
}

func TestRolloutJSON(t *testing.T) {
	r := NewRollout("r1")
	r.Spec.StepTimeout = Duration(90 * time.Second)
	b, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(b), `"stepTimeout":"1m30s"`) {
		t.Fatalf("%s %v", b, err)
	}
	var back Rollout
	if err := json.Unmarshal(b, &back); err != nil || back.Spec.StepTimeout != r.Spec.StepTimeout {
		t.Fatalf("%+v %v", back.Spec, err)
	}
	if err := json.Unmarshal([]byte(`{"spec":{"stepTimeout":"soon"}}`), &back); err == nil || !strings.Contains(err.Error(), "soon") {
		t.Fatalf("bad duration: %v", err)
	}
}
