package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestMemberIDRoundTripsAsHex(t *testing.T) {
	n := NewNode("cp-1")
	n.Status.MemberID = 0x8e9e05c52164694d // above 2^53: JSON numbers would lose it
	b, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"memberID":"8e9e05c52164694d"`) {
		t.Fatalf("encoded as %s", b)
	}
	var back Node
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Status.MemberID != n.Status.MemberID || back.APIVersion != Version || back.Kind != KindNode {
		t.Fatalf("round trip: %+v", back)
	}
	if err := json.Unmarshal([]byte(`{"status":{"memberID":"xyz"}}`), &back); err == nil || !strings.Contains(err.Error(), "xyz") {
		t.Fatalf("bad id accepted: %v", err)
	}
}

func TestOperationHistoryIsBounded(t *testing.T) {
	op := NewOperation("x")
	t0 := time.Unix(0, 0)
	for i := 0; i < MaxHistory+10; i++ {
		op.Status.Step = StepLearner
		op.Record(t0.Add(time.Duration(i)*time.Second), "c-1", "tick")
	}
	if len(op.Status.History) != MaxHistory {
		t.Fatalf("history has %d events", len(op.Status.History))
	}
	if got := op.Status.History[len(op.Status.History)-1].At; !got.Equal(t0.Add(time.Duration(MaxHistory+9) * time.Second)) {
		t.Fatalf("newest event at %v", got)
	}
	if op.Status.Message != "tick" || op.Status.History[0].Leader != "c-1" {
		t.Fatalf("status %+v", op.Status)
	}
}

func TestRemovePhaseFinished(t *testing.T) {
	for p, want := range map[RemovePhase]bool{RemovePending: false, RemoveRunning: false, RemoveDone: true, RemoveRefused: true, RemoveFailed: true} {
		if p.Finished() != want {
			t.Errorf("%q.Finished() = %v", p, !want)
		}
	}
}
