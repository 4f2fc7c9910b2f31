package statuspage

import (
	"slices"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// RolloutView is one rollout's progress.
type RolloutView struct {
	Name        string
	Phase       string
	Generation  int64
	Done, Total int
	Current     []string
	// ETA is the time left at the pace of the nodes done so far, "" until
	// one is done or once the rollout has finished.
	ETA     string
	Message string
	Halted  string // "node: reason" when halted
	Steps   []StepRow
}

// Percent is Done over Total as a whole percentage.
func (r RolloutView) Percent() int {
	if r.Total == 0 {
		return 0
	}
	return r.Done * 100 / r.Total
}

// StepRow is one node's step of a rollout: the timeline.
type StepRow struct {
	Node         string
	ControlPlane bool
	Phase        string
	Started      time.Time
	Took         string
	Message      string
}

// rolloutViews turns rollouts into views, running ones first, then the
// most recently started.
func rolloutViews(rs []*api.Rollout, now time.Time) []RolloutView {
	out := make([]RolloutView, 0, len(rs))
	for _, r := range rs {
		out = append(out, rolloutView(r, now))
	}
	slices.SortStableFunc(out, func(a, b RolloutView) int {
		return rank(a) - rank(b)
	})
	return out
}

func rank(v RolloutView) int {
	switch api.RolloutPhase(v.Phase) {
	case api.RolloutRunning, api.RolloutUndoing, api.RolloutHalted, api.RolloutPaused:
		return 0
	}
	return 1
}

func rolloutView(r *api.Rollout, now time.Time) RolloutView {
	done, total := r.Counts()
	phase := string(r.Status.Phase)
	if phase == "" {
		phase = "Pending"
	}
	v := RolloutView{Name: r.Metadata.Name, Phase: phase, Generation: r.Spec.Template.Generation, Done: done, Total: total,
		Current: r.Status.Current, Message: r.Status.Message}
	if r.Status.HaltedNode != "" {
		v.Halted = r.Status.HaltedNode + ": " + r.Status.HaltedReason
	}
	for _, n := range r.Status.Nodes {
		s := StepRow{Node: n.Name, ControlPlane: n.ControlPlane, Phase: string(n.Phase), Started: n.StartedAt, Message: n.Message}
		if s.Phase == "" {
			s.Phase = "Pending"
		}
		if !n.StartedAt.IsZero() {
			end := n.FinishedAt
			if end.IsZero() {
				end = now
			}
			s.Took = end.Sub(n.StartedAt).Round(time.Second).String()
		}
		v.Steps = append(v.Steps, s)
	}
	if !r.Status.Phase.Finished() {
		if eta, ok := rolloutETA(r, now); ok {
			v.ETA = eta.Round(time.Second).String()
		}
	}
	return v
}

// rolloutETA estimates the time left: the mean time of the finished
// nodes for every node not finished, less what the current ones have
// already taken. False until a node has finished.
func rolloutETA(r *api.Rollout, now time.Time) (time.Duration, bool) {
	var sum time.Duration
	var finished int
	var left time.Duration
	for _, n := range r.Status.Nodes {
		if !n.StartedAt.IsZero() && !n.FinishedAt.IsZero() {
			sum += n.FinishedAt.Sub(n.StartedAt)
			finished++
		}
	}
	if finished == 0 {
		return 0, false
	}
	mean := sum / time.Duration(finished)
	for _, n := range r.Status.Nodes {
		if !n.FinishedAt.IsZero() {
			continue
		}
		left += mean
		if !n.StartedAt.IsZero() {
			left -= min(mean, now.Sub(n.StartedAt))
		}
	}
	return left, true
}
