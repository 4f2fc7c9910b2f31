package rollout

import "testing"

func TestStepOutcome(t *testing.T) {
	for _, c := range []struct {
		s    Step
		undo bool
		want string
	}{
		{Step{Action: MarkDone, Nodes: []string{"cp-2"}}, false, "cp-2 applied the new configuration and is healthy"},
		{Step{Action: MarkDone, Nodes: []string{"dp-1", "dp-2"}}, false, "dp-1, dp-2 applied the new configuration and are healthy"},
		{Step{Action: MarkDone, Nodes: []string{"cp-2"}}, true, "cp-2 went back to its previous configuration and is healthy"},
		{Step{Action: MarkDone, Nodes: []string{"dp-1", "dp-2"}}, true, "dp-1, dp-2 went back to their previous configuration and are healthy"},
		{Step{Action: MarkDone, Nodes: []string{"cp-9"}, Reason: "cp-9 had no configuration before the rollout; left as it is"}, true, "cp-9: cp-9 had no configuration before the rollout; left as it is"},
		{Step{Action: Halt, Nodes: []string{"cp-3"}, Reason: "health check failed"}, false, "rollout halted at cp-3: health check failed"},
		{Step{Action: CloseOp, Reason: "step r-1 has no node in flight"}, false, "step closed: step r-1 has no node in flight"},
	} {
		if got := c.s.Outcome(c.undo); got != c.want {
			t.Errorf("%v (undo %v): got %q, want %q", c.s, c.undo, got, c.want)
		}
	}
}
