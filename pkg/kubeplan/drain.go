package kubeplan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// DrainFacts is what PlanDrain reads.
type DrainFacts struct {
	// Cluster is the cluster's name.
	Cluster string
	// Hook is the cluster's spec.drain.
	Hook api.DrainHook
	// Kubeconfig is the KUBECONFIG path the runner passes ("": its
	// default, the admin kubeconfig nico delivered).
	Kubeconfig string
	// Machines are the machines the cluster releases.
	Machines []string
	// Requests are the drain requests there are, by machine.
	Requests map[string]*api.DrainRequest
	// Runners are the cluster's ready control-plane machines.
	Runners []string
	// Deleting: the whole cluster goes; with no ready control plane left
	// there is no Kubernetes to drain from, and the machines go undrained.
	Deleting bool
	// Now is the leader's clock, against which a failed attempt's
	// FinishedAt plus its backoff is due.
	Now time.Time
}

// Backoff of a failed drain's retries: DrainRetryBase after the first
// failure, doubling after each next one, never more than DrainRetryMax.
// A drain is retried as it was (a disruption budget that blocked it
// clears by itself); a changed hook is asked at once.
const (
	DrainRetryBase = 30 * time.Second
	DrainRetryMax  = 5 * time.Minute
)

// DrainRetryDelay is how long the leader waits after an attempt that
// failed with retry failures of the same hook before it.
func DrainRetryDelay(retry int) time.Duration {
	d := DrainRetryBase
	for range max(retry, 0) {
		if d >= DrainRetryMax {
			break
		}
		d *= 2
	}
	return min(d, DrainRetryMax)
}

// DrainRetryAt is when the failed attempt req is retried: its runner's
// FinishedAt (StartedAt, else now, when unset) plus its backoff.
func DrainRetryAt(req *api.DrainRequest, now time.Time) time.Time {
	at := req.Status.FinishedAt
	if at.IsZero() {
		at = req.Status.StartedAt
	}
	if at.IsZero() {
		at = now
	}
	return at.Add(DrainRetryDelay(req.Spec.Retry))
}

// DrainPlan is PlanDrain's decision.
type DrainPlan struct {
	// Write are the requests to (re)write: a first attempt, or a new one
	// after the hook changed or the runner stopped being ready.
	Write []api.DrainRequestSpec
	// Drained are the machines that may be released now.
	Drained []string
	// Condition is the cluster's CondMachinesDrained.
	Condition Condition
	// RetryAt is the earliest time a failed drain is retried (zero: none
	// waits).
	RetryAt time.Time
}

// PlanDrain plans the drains of the machines a cluster releases. Each
// machine gets a request run by one ready control-plane machine (another
// than itself when there is one; the one already asked while it stays
// ready). A machine is released once its request's current attempt
// succeeded; a failed attempt holds it until its backoff passed (then
// it is asked again, as it was) or the hook (command or timeout)
// changes, which asks again at once.
//
//	no request --> write attempt 1 (runner: first ready, not itself)
//	hook changed | runner not ready (and not succeeded) --> write attempt n+1
//	answered: Succeeded --> Drained
//	          Failed, before DrainRetryAt --> held, condition names it and the next try
//	          Failed, at DrainRetryAt --> write attempt n+1 (retry r+1)
//	not answered --> Draining
func PlanDrain(f DrainFacts) DrainPlan {
	var p DrainPlan
	var running, failed, noRunner []string
	for _, m := range f.Machines {
		req := f.Requests[m]
		if req != nil && req.Spec.Cluster == f.Cluster && req.Answered() && req.Status.Phase == api.DrainSucceeded && sameHook(req.Spec, f) {
			p.Drained = append(p.Drained, m)
			continue
		}
		runner := ""
		if req != nil && slices.Contains(f.Runners, req.Spec.Runner) {
			runner = req.Spec.Runner
		} else if i := slices.IndexFunc(f.Runners, func(r string) bool { return r != m }); i >= 0 {
			runner = f.Runners[i]
		} else if len(f.Runners) > 0 {
			runner = f.Runners[0]
		}
		if runner == "" {
			if f.Deleting {
				p.Drained = append(p.Drained, m)
			}
			noRunner = append(noRunner, m)
			continue
		}
		fresh := req == nil || req.Spec.Cluster != f.Cluster || !sameHook(req.Spec, f)
		failedNow := !fresh && req.Answered() && req.Status.Phase == api.DrainFailed
		due := failedNow && !f.Now.Before(DrainRetryAt(req, f.Now))
		if fresh || req.Spec.Runner != runner || due {
			attempt, retry := 1, 0
			if req != nil {
				attempt = req.Spec.Attempt + 1
			}
			if !fresh {
				retry = req.Spec.Retry
				if failedNow {
					retry++
				}
			}
			p.Write = append(p.Write, api.DrainRequestSpec{Cluster: f.Cluster, Machine: m, Runner: runner,
				Command: slices.Clone(f.Hook.Command), Timeout: f.Hook.Timeout, Kubeconfig: f.Kubeconfig, Attempt: attempt, Retry: retry})
			running = append(running, m+" (attempt "+fmt.Sprint(attempt)+" on "+runner+")")
			continue
		}
		if failedNow {
			at := DrainRetryAt(req, f.Now)
			if p.RetryAt.IsZero() || at.Before(p.RetryAt) {
				p.RetryAt = at
			}
			// The time, not a countdown: the message stays the same until
			// the retry (no status write, no event, each pass).
			failed = append(failed, fmt.Sprintf("%s; attempt %d at %s", DrainFailure(req), req.Spec.Attempt+1, at.UTC().Format(time.RFC3339)))
			continue
		}
		running = append(running, fmt.Sprintf("%s (attempt %d on %s)", m, req.Spec.Attempt, runner))
	}
	c := Condition{Type: api.CondMachinesDrained}
	switch {
	case len(failed) > 0:
		c.Reason, c.Message = api.ReasonDrainFailed, strings.Join(failed, "; ")+"; retried with backoff, or fix spec.drain and apply it to retry at once"
	case len(noRunner) > 0 && f.Deleting:
		c.Status, c.Reason = true, api.ReasonNoDrainer
		c.Message = "released undrained (the cluster is deleted and no control-plane machine is ready): " + strings.Join(noRunner, ", ")
	case len(noRunner) > 0:
		c.Reason, c.Message = api.ReasonNoDrainer, "no ready control-plane machine to drain "+strings.Join(noRunner, ", ")+" from; held"
	case len(running) > 0:
		c.Reason, c.Message = api.ReasonDraining, "draining "+strings.Join(running, ", ")
	default:
		c.Status, c.Reason, c.Message = true, api.ReasonDrained, "drained "+strings.Join(p.Drained, ", ")
	}
	p.Condition = c
	return p
}

// DrainFailure says how req's attempt failed: the machine, the exit code
// or the timeout, and the output's tail.
func DrainFailure(req *api.DrainRequest) string {
	s := req.Status
	what := fmt.Sprintf("exit code %d", s.ExitCode)
	if s.TimedOut {
		what = fmt.Sprintf("timed out after %s (killed, exit code %d)", req.Spec.TimeoutOrDefault(), s.ExitCode)
	}
	msg := fmt.Sprintf("drain of %s on %s (attempt %d) failed: %s", req.Spec.Machine, s.Runner, req.Spec.Attempt, what)
	if s.Message != "" && !s.TimedOut && s.ExitCode < 0 {
		msg += ": " + s.Message
	}
	if out := strings.TrimSpace(s.Output); out != "" {
		msg += "; output: " + out
	}
	return msg
}

func sameHook(s api.DrainRequestSpec, f DrainFacts) bool {
	return slices.Equal(s.Command, f.Hook.Command) && time.Duration(s.Timeout) == time.Duration(f.Hook.Timeout) && s.Kubeconfig == f.Kubeconfig
}
