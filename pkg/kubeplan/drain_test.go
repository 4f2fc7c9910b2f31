package kubeplan

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

func drainReq(machine, runner string, attempt int, cmd []string, phase api.DrainPhase, exit int, out string) *api.DrainRequest {
	r := api.NewDrainRequest(machine)
	r.Spec = api.DrainRequestSpec{Cluster: "k1", Machine: machine, Runner: runner, Command: cmd, Attempt: attempt}
	if phase != "" {
		r.Status = api.DrainRequestStatus{Attempt: attempt, Runner: runner, Phase: phase, ExitCode: exit, Output: out}
	}
	return r
}

func TestPlanDrain(t *testing.T) {
	cmd := []string{"kubectl", "drain"}
	fixed := []string{"kubectl", "drain", "--force"}
	hook := api.DrainHook{Command: cmd}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	failedAt := func(r *api.DrainRequest, retry int, ago time.Duration) *api.DrainRequest {
		r.Spec.Retry, r.Status.FinishedAt = retry, now.Add(-ago)
		return r
	}
	tests := []struct {
		name     string
		f        DrainFacts
		write    []string // machine@runner#attempt
		retries  []int    // the written requests' Retry, when given
		drained  []string
		status   bool
		reason   string
		contains []string
	}{
		{name: "first ask, on another ready control-plane machine",
			f:     DrainFacts{Cluster: "k1", Hook: hook, Machines: []string{"cp-1", "dp-2"}, Runners: []string{"cp-1", "cp-2"}},
			write: []string{"cp-1@cp-2#1", "dp-2@cp-1#1"}, reason: api.ReasonDraining, contains: []string{"dp-2 (attempt 1 on cp-1)"}},
		{name: "running: nothing written",
			f: DrainFacts{Cluster: "k1", Hook: hook, Machines: []string{"dp-2"}, Runners: []string{"cp-1"},
				Requests: map[string]*api.DrainRequest{"dp-2": drainReq("dp-2", "cp-1", 1, cmd, api.DrainRunning, 0, "")}},
			reason: api.ReasonDraining},
		{name: "succeeded: released",
			f: DrainFacts{Cluster: "k1", Hook: hook, Machines: []string{"dp-2"}, Runners: []string{"cp-1"},
				Requests: map[string]*api.DrainRequest{"dp-2": drainReq("dp-2", "cp-1", 2, cmd, api.DrainSucceeded, 0, "")}},
			drained: []string{"dp-2"}, status: true, reason: api.ReasonDrained},
		{name: "succeeded even though its runner is gone",
			f: DrainFacts{Cluster: "k1", Hook: hook, Machines: []string{"dp-2"},
				Requests: map[string]*api.DrainRequest{"dp-2": drainReq("dp-2", "cp-1", 1, cmd, api.DrainSucceeded, 0, "")}},
			drained: []string{"dp-2"}, status: true, reason: api.ReasonDrained},
		{name: "failed: held, the condition names machine, exit code and output",
			f: DrainFacts{Cluster: "k1", Hook: hook, Machines: []string{"dp-1", "dp-2"}, Runners: []string{"cp-1"},
				Requests: map[string]*api.DrainRequest{"dp-2": drainReq("dp-2", "cp-1", 1, cmd, api.DrainFailed, 3, "cannot evict pod web-1"),
					"dp-1": drainReq("dp-1", "cp-1", 1, cmd, api.DrainSucceeded, 0, "")}},
			drained: []string{"dp-1"}, reason: api.ReasonDrainFailed, contains: []string{"dp-2", "exit code 3", "cannot evict pod web-1"}},
		{name: "failed, its backoff not passed: held, the condition says the next try",
			f: DrainFacts{Cluster: "k1", Hook: hook, Machines: []string{"dp-2"}, Runners: []string{"cp-1"}, Now: now,
				Requests: map[string]*api.DrainRequest{"dp-2": failedAt(drainReq("dp-2", "cp-1", 1, cmd, api.DrainFailed, 3, "disruption budget"), 0, 29*time.Second)}},
			reason: api.ReasonDrainFailed, contains: []string{"(attempt 1) failed", "attempt 2 at 2026-12-01T12:00:01Z"}},
		{name: "failed, its backoff passed: the same hook asked again",
			f: DrainFacts{Cluster: "k1", Hook: hook, Machines: []string{"dp-2"}, Runners: []string{"cp-1"}, Now: now,
				Requests: map[string]*api.DrainRequest{"dp-2": failedAt(drainReq("dp-2", "cp-1", 1, cmd, api.DrainFailed, 3, ""), 0, 30*time.Second)}},
			write: []string{"dp-2@cp-1#2"}, retries: []int{1}, reason: api.ReasonDraining, contains: []string{"dp-2 (attempt 2 on cp-1)"}},
		{name: "third failure in a row: waits 2m",
			f: DrainFacts{Cluster: "k1", Hook: hook, Machines: []string{"dp-2"}, Runners: []string{"cp-1"}, Now: now,
				Requests: map[string]*api.DrainRequest{"dp-2": failedAt(drainReq("dp-2", "cp-1", 3, cmd, api.DrainFailed, 1, ""), 2, time.Minute)}},
			reason: api.ReasonDrainFailed, contains: []string{"(attempt 3) failed", "attempt 4 at 2026-12-01T12:01:00Z"}},
		{name: "many failures: the backoff stops at 5m",
			f: DrainFacts{Cluster: "k1", Hook: hook, Machines: []string{"dp-2"}, Runners: []string{"cp-1"}, Now: now,
				Requests: map[string]*api.DrainRequest{"dp-2": failedAt(drainReq("dp-2", "cp-1", 9, cmd, api.DrainFailed, 1, ""), 8, 5*time.Minute)}},
			write: []string{"dp-2@cp-1#10"}, retries: []int{9}, reason: api.ReasonDraining},
		{name: "failed, then the command fixed: asked again at once, the backoff reset",
			f: DrainFacts{Cluster: "k1", Hook: api.DrainHook{Command: fixed}, Machines: []string{"dp-2"}, Runners: []string{"cp-1"}, Now: now,
				Requests: map[string]*api.DrainRequest{"dp-2": failedAt(drainReq("dp-2", "cp-1", 4, cmd, api.DrainFailed, 3, ""), 3, time.Second)}},
			write: []string{"dp-2@cp-1#5"}, retries: []int{0}, reason: api.ReasonDraining},
		{name: "failed, then the command fixed: asked again",
			f: DrainFacts{Cluster: "k1", Hook: api.DrainHook{Command: fixed}, Machines: []string{"dp-2"}, Runners: []string{"cp-1"},
				Requests: map[string]*api.DrainRequest{"dp-2": drainReq("dp-2", "cp-1", 1, cmd, api.DrainFailed, 3, "")}},
			write: []string{"dp-2@cp-1#2"}, reason: api.ReasonDraining},
		{name: "a timeout changed: asked again",
			f: DrainFacts{Cluster: "k1", Hook: api.DrainHook{Command: cmd, Timeout: api.Duration(time.Minute)}, Machines: []string{"dp-2"}, Runners: []string{"cp-1"},
				Requests: map[string]*api.DrainRequest{"dp-2": drainReq("dp-2", "cp-1", 1, cmd, api.DrainFailed, -1, "")}},
			write: []string{"dp-2@cp-1#2"}, reason: api.ReasonDraining},
		{name: "the runner is no longer ready: another is asked",
			f: DrainFacts{Cluster: "k1", Hook: hook, Machines: []string{"dp-2"}, Runners: []string{"cp-2"},
				Requests: map[string]*api.DrainRequest{"dp-2": drainReq("dp-2", "cp-1", 1, cmd, api.DrainRunning, 0, "")}},
			write: []string{"dp-2@cp-2#2"}, reason: api.ReasonDraining},
		{name: "no ready control plane: held",
			f:      DrainFacts{Cluster: "k1", Hook: hook, Machines: []string{"dp-2"}},
			reason: api.ReasonNoDrainer, contains: []string{"dp-2", "held"}},
		{name: "deleted with no ready control plane: released undrained",
			f:       DrainFacts{Cluster: "k1", Hook: hook, Machines: []string{"cp-1", "dp-2"}, Deleting: true},
			drained: []string{"cp-1", "dp-2"}, status: true, reason: api.ReasonNoDrainer, contains: []string{"undrained"}},
		{name: "another cluster's old request is not taken as drained",
			f: DrainFacts{Cluster: "k2", Hook: hook, Machines: []string{"dp-2"}, Runners: []string{"cp-9"},
				Requests: map[string]*api.DrainRequest{"dp-2": drainReq("dp-2", "cp-1", 1, cmd, api.DrainSucceeded, 0, "")}},
			write: []string{"dp-2@cp-9#2"}, reason: api.ReasonDraining},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PlanDrain(tt.f)
			var got []string
			for i, w := range p.Write {
				got = append(got, fmt.Sprintf("%s@%s#%d", w.Machine, w.Runner, w.Attempt))
				if i < len(tt.retries) && w.Retry != tt.retries[i] {
					t.Errorf("written %s retry %d, want %d", w.Machine, w.Retry, tt.retries[i])
				}
				if !slices.Equal(w.Command, tt.f.Hook.Command) || w.Timeout != tt.f.Hook.Timeout || w.Cluster != tt.f.Cluster {
					t.Errorf("written %+v: not the hook %+v", w, tt.f.Hook)
				}
			}
			if !slices.Equal(got, tt.write) || !slices.Equal(p.Drained, tt.drained) {
				t.Fatalf("write %v drained %v; want %v, %v", got, p.Drained, tt.write, tt.drained)
			}
			c := p.Condition
			if c.Type != api.CondMachinesDrained || c.Status != tt.status || c.Reason != tt.reason {
				t.Fatalf("condition %+v; want status %v reason %s", c, tt.status, tt.reason)
			}
			for _, s := range tt.contains {
				if !strings.Contains(c.Message, s) {
					t.Errorf("condition message %q does not name %q", c.Message, s)
				}
			}
		})
	}
}

// TestDrainRetryDelay: 30s doubling, at most 5m.
func TestDrainRetryDelay(t *testing.T) {
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	for retry, w := range want {
		if got := DrainRetryDelay(retry); got != w {
			t.Errorf("DrainRetryDelay(%d) = %s, want %s", retry, got, w)
		}
	}
	if got := DrainRetryDelay(1000); got != DrainRetryMax {
		t.Errorf("DrainRetryDelay(1000) = %s", got)
	}
}
