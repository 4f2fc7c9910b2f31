package restore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/homystack/nico/pkg/failpoint"
	"github.com/homystack/nico/pkg/member"
)

// Runner takes a Journal through its steps, saving it after each.
type Runner struct {
	Fleet   Fleet
	Journal FileJournal
	// Prefix is nico's keyspace prefix in etcd.
	Prefix string
	Now    func() time.Time
	Log    *slog.Logger
	// AfterStep, when set, is called after each step is saved; an error
	// ends Run there (tests use it to kill a restore mid-way).
	AfterStep func(Step) error
	// ResumeWithin bounds how long a resumed run waits for the ports of
	// the members it serves again to be free (0: 30 s): an etcd process
	// of the killed run gets SIGTERM when nicoctl dies and holds them
	// until it has exited.
	ResumeWithin time.Duration
}

// Run carries j from its current step to StepDone. A journal loaded from
// the file resumes: the steps done are not done again.
func (r *Runner) Run(ctx context.Context, j *Journal) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.Log == nil {
		r.Log = slog.New(slog.DiscardHandler)
	}
	log := r.Log.With("op", j.ID, "target", j.Target)
	if err := r.resume(ctx, j); err != nil {
		return err
	}
	for j.Step != StepDone {
		from := j.Step
		msg, err := r.step(ctx, j)
		if err != nil {
			return fmt.Errorf("restore: %s step %s: %w", j.ID, from, err)
		}
		j.record(r.Now(), from, msg)
		if err := r.Journal.Save(j); err != nil {
			return err
		}
		log.Info("restore step done", "step", from, "next", j.Step, "msg", msg)
		if from == StepRejoin {
			if err := writeOp(ctx, r.Fleet, r.Prefix, j); err != nil {
				return err
			}
		}
		if p, ok := stepFailpoints[from]; ok {
			failpoint.Hit(p)
		}
		if r.AfterStep != nil {
			if err := r.AfterStep(from); err != nil {
				return err
			}
		}
	}
	return nil
}

// resume serves again what an earlier, killed run had started: the target
// once it started, and the others already rejoined.
func (r *Runner) resume(ctx context.Context, j *Journal) error {
	if stepIndex(j.Step) <= stepIndex(StepStart) || j.Step == StepDone {
		return nil
	}
	// Together: a member waits for a quorum of its peers to serve.
	nodes := append([]string{j.Target}, j.Others[:j.Rejoined]...)
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	within := r.ResumeWithin
	if within == 0 {
		within = 30 * time.Second
	}
	deadline := r.Now().Add(within)
	for i, n := range nodes {
		wg.Go(func() {
			if err := r.serveAgain(ctx, n, deadline); err != nil {
				errs[i] = fmt.Errorf("restore: resume %s: serve %s: %w", j.ID, n, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// serveAgain serves node, trying again while its ports are still held
// (by the exiting member of a killed run) until deadline.
func (r *Runner) serveAgain(ctx context.Context, node string, deadline time.Time) error {
	wait := 100 * time.Millisecond
	for {
		_, err := r.Fleet.Serve(ctx, node, nil)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || !r.Now().Before(deadline) {
			return err
		}
		r.Log.Warn("restore: a member's port is still in use (the killed run's etcd exiting?), trying again", "node", node, "in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// step does j's current step and moves it on.
func (r *Runner) step(ctx context.Context, j *Journal) (string, error) {
	switch j.Step {
	case StepStop:
		// Every member is stopped and fenced before the new cluster
		// starts: an old member never serves beside it.
		// All at once: a member stopped alone waits on its peers.
		nodes := append([]string{j.Target}, j.Others...)
		errs := make([]error, len(nodes))
		var wg sync.WaitGroup
		for i, n := range nodes {
			var f *member.Fence
			if n != j.Target || j.Kind == KindRestore {
				f = &member.Fence{By: j.ID, At: r.Now(), Reason: fmt.Sprintf("%s onto %s", j.Kind, j.Target)}
			}
			wg.Go(func() {
				if err := r.Fleet.Stop(ctx, n, f); err != nil {
					errs[i] = fmt.Errorf("stop %s: %w", n, err)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return "", err
		}
		j.Step = StepRestore
		if j.Kind == KindRecover {
			j.Step = StepStart
		}
		return fmt.Sprintf("stopped and fenced %d members", 1+len(j.Others)), nil
	case StepRestore:
		if err := r.Fleet.Restore(ctx, j.Target, j.Snapshot.Path, j.BumpRevision); err != nil {
			return "", err
		}
		j.Step = StepStart
		return fmt.Sprintf("restored %s (revision %d, %d keys) onto %s", j.Snapshot.Path, j.Snapshot.Revision, j.Snapshot.Keys, j.Target), nil
	case StepStart:
		var hold *FirstHold
		if j.Kind == KindRecover {
			// A restored member is held by the snapshot's cluster ID; a
			// recovered one keeps its ID: it is held before it serves.
			hold = &FirstHold{Prefix: r.Prefix, Journal: j}
		}
		id, err := r.Fleet.Serve(ctx, j.Target, hold)
		if err != nil {
			return "", err
		}
		j.NewClusterID = id
		j.Step = StepRecord
		return fmt.Sprintf("%s serves the new cluster %x", j.Target, id), nil
	case StepRecord:
		if err := takeSlot(ctx, r.Fleet, r.Prefix, j); err != nil {
			return "", err
		}
		j.Step = StepRejoin
		return "journaled in the new cluster; the one-change slot is held", nil
	case StepRejoin:
		if j.Rejoined >= len(j.Others) {
			j.Step = StepFinish
			return "every other member rejoined", nil
		}
		n := j.Others[j.Rejoined]
		if err := r.Fleet.Rejoin(ctx, n); err != nil {
			return "", fmt.Errorf("rejoin %s: %w", n, err)
		}
		j.Rejoined++
		return n + " rejoined as a learner and was promoted", nil
	case StepFinish:
		if err := releaseSlot(ctx, r.Fleet, r.Prefix, j); err != nil {
			return "", err
		}
		j.Step = StepDone
		return "done", nil
	default:
		return "", fmt.Errorf("journal step %q is not known (want one of %v)", j.Step, steps)
	}
}

// stepFailpoints are the failpoints (pkg/failpoint; armed only in a
// -tags failpoints build) reached once a step is saved.
var stepFailpoints = map[Step]string{
	StepStop:    failpoint.RestoreAfterStop,
	StepRestore: failpoint.RestoreAfterRestore,
	StepStart:   failpoint.RestoreAfterStart,
	StepRecord:  failpoint.RestoreAfterRecord,
	StepRejoin:  failpoint.RestoreAfterRejoin,
}

var steps = []Step{StepStop, StepRestore, StepStart, StepRecord, StepRejoin, StepFinish, StepDone}

func stepIndex(s Step) int {
	for i, x := range steps {
		if x == s {
			return i
		}
	}
	return -1
}
