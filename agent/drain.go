package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/clusternix"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/store"
)

// DrainConfig says how a control-plane agent runs the drain hooks its
// clusters ask of it (api.DrainRequest).
type DrainConfig struct {
	// Kubeconfig is KUBECONFIG for a request that names none ("": the
	// admin kubeconfig nico delivers, clusternix.DefaultPaths().Kubeconfig).
	Kubeconfig string
	// Resync is how often the requests are re-read besides their watch
	// (30s when zero).
	Resync time.Duration
	// OutputTail is how many of the last bytes of a command's output are
	// kept in the request's status (DrainTail when zero).
	OutputTail int
}

// drainer is the agent's drains controller, on control-plane machines:
// for every DrainRequest whose runner is this machine and whose current
// attempt it has not answered, it writes Running, runs the request's
// command (NICO_DRAIN_NODE the leaving machine, KUBECONFIG, bounded by
// the request's timeout) and writes the exit status and the output's tail.
// Each write is a compare-and-swap on the request as read: the leader owns
// the spec, and a result never lands on an attempt it does not answer.
//
//	request (watch) --runner is me, attempt unanswered or Running--> write Running
//	    --> run command --> exit 0: Succeeded | else: Failed (exit code, timed out, tail)
type drainer struct {
	name  string // the node's
	now   func() time.Time
	log   *slog.Logger
	store func() *store.Store
	cfg   DrainConfig
}

func (a *Agent) drains() controller.Controller {
	if !a.controlPlane() {
		return nil
	}
	cfg := a.cfg.Drain
	if cfg.Kubeconfig == "" {
		cfg.Kubeconfig = clusternix.DefaultPaths().Kubeconfig
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 30 * time.Second
	}
	if cfg.OutputTail <= 0 {
		cfg.OutputTail = DrainTail
	}
	d := &drainer{name: a.cfg.Name, now: func() time.Time { return a.Now() }, log: a.log, store: a.store, cfg: cfg}
	// A drain runs as long as its timeout: the reconcile is not stalled.
	return &controller.Func{ControllerName: "drains", Prefixes: []string{store.DrainRequestsDir}, Resync: cfg.Resync,
		Policy: controller.HealthPolicy{StallAfter: -1}, Do: d.reconcile}
}

// reconcile runs every request asked of this machine, one at a time.
func (d *drainer) reconcile(ctx context.Context) error {
	reqs, _, err := store.List[api.DrainRequest](ctx, d.store(), store.DrainRequestsDir)
	if err != nil {
		return fmt.Errorf("agent: drains: %w", err)
	}
	for _, r := range reqs {
		if r.Spec.Runner != d.name || r.Spec.Attempt <= 0 {
			continue
		}
		// Answered and finished: done. Running for this attempt: an
		// earlier process of this agent died in it; run it again (a drain
		// is repeatable).
		if r.Answered() && r.Status.Phase != api.DrainRunning {
			continue
		}
		if err := d.run(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// run runs one attempt of r and records it.
func (d *drainer) run(ctx context.Context, r *api.DrainRequest) error {
	key := store.DrainRequestKey(r.Metadata.Name)
	log := d.log.With("cluster", r.Spec.Cluster, "machine", r.Spec.Machine, "attempt", r.Spec.Attempt)
	r.Status = api.DrainRequestStatus{Attempt: r.Spec.Attempt, Runner: d.name, Phase: api.DrainRunning, ExitCode: 0, StartedAt: d.now().UTC()}
	if err := d.store().Update(ctx, key, r); errors.Is(err, store.ErrConflict) {
		return nil // changed meanwhile: the watch brings it back
	} else if err != nil {
		return fmt.Errorf("agent: drain %s: %w", r.Spec.Machine, err)
	}
	kubeconfig := r.Spec.Kubeconfig
	if kubeconfig == "" {
		kubeconfig = d.cfg.Kubeconfig
	}
	timeout := r.Spec.TimeoutOrDefault()
	log.Info("drain started", "command", r.Spec.Command, "timeout", timeout)
	res := runDrain(ctx, drainArgs(r.Spec), []string{"NICO_DRAIN_NODE=" + r.Spec.Machine, "NICO_DRAIN_CLUSTER=" + r.Spec.Cluster, "KUBECONFIG=" + kubeconfig}, timeout, d.cfg.OutputTail)
	if ctx.Err() != nil {
		return nil // stopping: the request stays Running, run again on restart
	}
	r.Status.FinishedAt = d.now().UTC()
	r.Status.ExitCode, r.Status.TimedOut, r.Status.Output = res.ExitCode, res.TimedOut, res.Output
	r.Status.Phase = api.DrainSucceeded
	if res.Err != nil {
		r.Status.Phase, r.Status.Message = api.DrainFailed, res.Err.Error()
		log.Warn("drain failed", "exitCode", res.ExitCode, "timedOut", res.TimedOut, "err", res.Err)
	} else {
		log.Info("drain succeeded", "took", r.Status.FinishedAt.Sub(r.Status.StartedAt))
	}
	if err := d.store().Update(ctx, key, r); errors.Is(err, store.ErrConflict) {
		log.Info("drain result dropped: the request changed while it ran")
		return nil
	} else if err != nil {
		return fmt.Errorf("agent: drain %s: result: %w", r.Spec.Machine, err)
	}
	return nil
}

// drainArgs is the request's command with $NICO_DRAIN_NODE and
// $NICO_DRAIN_CLUSTER (or ${...}) in its arguments replaced by their
// values: the command is run as is, not through a shell, and
// ["kubectl", "drain", "$NICO_DRAIN_NODE"] should work as written.
func drainArgs(s api.DrainRequestSpec) []string {
	r := strings.NewReplacer("${NICO_DRAIN_NODE}", s.Machine, "$NICO_DRAIN_NODE", s.Machine,
		"${NICO_DRAIN_CLUSTER}", s.Cluster, "$NICO_DRAIN_CLUSTER", s.Cluster)
	out := slices.Clone(s.Command)
	for i := 1; i < len(out); i++ {
		out[i] = r.Replace(out[i])
	}
	return out
}
