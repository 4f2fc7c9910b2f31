package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/failpoint"
	"github.com/homystack/nico/pkg/metrics"
	"github.com/homystack/nico/pkg/store"
)

// generations is the controller that applies the node's desired NixOS
// configuration whenever its generation (or attempt) differs from the one
// the agent last finished, and reports the outcome in the configuration's
// status; it watches nixosconfigs/<node>, with a resync every
// generationResync. A generation that failed is not tried again until
// spec.attempt changes; a generation left Applying by an agent that
// stopped mid-way, or that restarted into the nico-agent the generation
// installed (agent/upgrade.go), is applied again (the applier skips it
// when the system already runs it). Once a restart into a new agent is
// asked for, it applies nothing more. An apply may rightly take long (a
// build): that is no stall.
//
// With HostFiles set, it also watches the machine's projected secrets:
// while the spec's generation is the one applied, its host files are
// synced on every pass, so a renewed certificate lands on the host
// without a new generation (in this controller, so never concurrently
// with an apply that writes another generation's files).
//
//	watch/tick --> read config --(settled)--> wait (Applied: sync host files)
//	                   |
//	                   +--(new generation or attempt)--> status Applying --> Apply --> status Applied | Failed
func (a *Agent) generations() controller.Controller {
	prefixes := []string{store.NixosConfigKey(a.cfg.Name)}
	if a.cfg.HostFiles != nil {
		prefixes = append(prefixes, store.NodeNamedSecretsKey(a.cfg.Name))
	}
	g := a.generationRunner()
	return &controller.Func{ControllerName: "generations", Prefixes: prefixes, Resync: generationResync,
		Policy: controller.HealthPolicy{StallAfter: -1}, Do: func(ctx context.Context) error {
			if g.upgradeAsked() {
				return nil // the new agent applies what comes next
			}
			if err := g.applyDesired(ctx); err != nil {
				return fmt.Errorf("agent: generation: %w", err)
			}
			return nil
		}}
}

// generationResync is the generations controller's tick besides its
// watch. The watch misses no change (the runtime watches again from the
// last revision it delivered, and reconciles after a compaction), so the
// tick only bounds how late host files changed on the machine itself are
// put back (hostFilesResync). Each idle agent reads its configuration
// once per tick: 33 reads a second into etcd from 1 000 machines.
const generationResync = 30 * time.Second

// generationRunner applies the node's desired generation, reports its
// outcome and syncs its host files: the generations controller's work, and
// a removed machine's release. It takes what it uses, not the agent.
type generationRunner struct {
	name      string
	applier   apply.Applier
	hostFiles *apply.HostFiles // nil: none
	store     func() *store.Store
	now       func() time.Time
	log       *slog.Logger
	metrics   *metrics.Agent
	// checks are the applier's health checks of a switched node.
	checks []apply.Check
	// applied tells the gossip mesh of a generation applied.
	applied func(gen int64)
	// upgradeAsked: a restart into a new agent was asked for; upgraded
	// asks for one when the generation installs another nico-agent.
	upgradeAsked func() bool
	upgraded     func(log *slog.Logger, skipped bool) bool
	// synced is what the host files were last synced from, and when.
	synced hostFilesMark
}

// generationRunner is the agent's generationRunner.
func (a *Agent) generationRunner() *generationRunner {
	return &generationRunner{name: a.cfg.Name, applier: a.cfg.Applier, hostFiles: a.cfg.HostFiles, store: a.store, now: func() time.Time { return a.Now() },
		log: a.log, metrics: a.cfg.Metrics, checks: a.generationChecks(), applied: a.gossip.setApplied,
		upgradeAsked: a.supervisor.upgradeAsked, upgraded: a.upgraded}
}

// applyDesired applies the desired generation once if it is not settled.
func (g *generationRunner) applyDesired(ctx context.Context) error {
	key := store.NixosConfigKey(g.name)
	c := &api.NixosConfiguration{}
	if err := g.store().Get(ctx, key, c); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	}
	g.applied(c.Status.AppliedGeneration)
	if c.Settled() != api.GenerationPending {
		return g.syncHostFiles(ctx, c)
	}
	gen, attempt := c.Spec.Generation, c.Spec.Attempt
	started := g.now()
	c.Status.Generation, c.Status.Attempt, c.Status.Phase, c.Status.UpdatedAt = gen, attempt, api.GenerationApplying, started
	if err := g.store().Update(ctx, key, c); err != nil {
		return fmt.Errorf("agent: mark generation %d applying: %w", gen, err)
	}
	log := g.log.With("generation", gen, "attempt", attempt, "revision", c.Spec.Revision)
	log.Info("applying generation")
	failpoint.Hit(failpoint.AgentBeforeSwitch)
	res, err := g.applier.Apply(ctx, apply.Generation{Machine: g.name, Number: gen, Attempt: attempt, Spec: c.Spec, Checks: g.checks})
	if ctx.Err() != nil {
		return nil // stopped mid-way: the next start applies it again
	}
	if err == nil && g.upgraded(log, res.Skipped) {
		return nil // left Applying: the new agent reports it (agent/upgrade.go)
	}
	rec := api.GenerationRecord{Generation: gen, Toplevel: res.Toplevel, Revision: c.Spec.Revision, Started: started, Finished: g.now()}
	if err != nil {
		rec.Phase, rec.Message = api.GenerationFailed, err.Error()
		log.Error("generation failed", "err", err, "rolledBack", res.RolledBack)
	} else {
		rec.Phase = api.GenerationApplied
		if res.Skipped {
			rec.Message = "already running"
		}
		log.Info("generation applied", "toplevel", res.Toplevel, "skipped", res.Skipped, "rebootNeeded", res.RebootNeeded)
	}
	g.metrics.Generation(generationOutcome(rec.Phase, res.RolledBack))
	if err := g.report(ctx, c, gen, attempt, res, rec); err != nil {
		return err
	}
	if rec.Phase == api.GenerationApplied {
		g.applied(gen)
	}
	return nil
}

// report writes the outcome into c, the configuration as its Applying
// mark wrote it: one write when nothing else wrote it meanwhile. On a
// conflicting write (the leader may have written a newer spec) it reads
// the configuration again and writes the outcome into that.
func (g *generationRunner) report(ctx context.Context, c *api.NixosConfiguration, gen int64, attempt int, res apply.Result, rec api.GenerationRecord) error {
	key := store.NixosConfigKey(g.name)
	for try := 0; ; try++ {
		if try > 0 {
			c = &api.NixosConfiguration{}
			if err := g.store().Get(ctx, key, c); err != nil {
				return err
			}
		}
		s := &c.Status
		s.Generation, s.Attempt, s.Phase, s.UpdatedAt = gen, attempt, rec.Phase, rec.Finished
		if res.Toplevel != "" {
			s.Toplevel = res.Toplevel
		}
		s.RebootNeeded = res.RebootNeeded
		s.LastError = ""
		if rec.Phase == api.GenerationApplied {
			s.AppliedGeneration = gen
		} else {
			s.LastError = rec.Message
		}
		c.RecordGeneration(rec)
		err := g.store().Update(ctx, key, c)
		if err == nil || !errors.Is(err, store.ErrConflict) || try >= 5 {
			return err
		}
	}
}

// generationChecks adds the local etcd member's health on a control-plane node.
func (a *Agent) generationChecks() []apply.Check {
	if !a.controlPlane() {
		return nil
	}
	return []apply.Check{apply.CheckFunc{Label: "local etcd member", F: func(ctx context.Context) error {
		// A client of its own: clientv3's Status dials the endpoint
		// reading the client's endpoint list unguarded, which the store
		// client's auto-sync rewrites meanwhile.
		cli, err := a.etcdClient([]string{a.cfg.ClientURL}, 0)
		if err != nil {
			return err
		}
		defer cli.Close()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		st, err := cli.Status(cctx, a.cfg.ClientURL)
		if err != nil {
			return err
		}
		if len(st.Errors) > 0 {
			return fmt.Errorf("member reports %v", st.Errors)
		}
		if st.Leader == 0 {
			return errors.New("member has no leader")
		}
		return nil
	}}}
}

// release switches a removed machine to its configuration's onRemoveFlake
// (an attribute of the same flake, "#attr"), when it names one, and records
// the outcome in the configuration's history. It leaves status.generation
// alone: a machine started again applies its desired generation anew.
func (g *generationRunner) release(ctx context.Context) {
	if g.applier == nil || g.store() == nil {
		return
	}
	key := store.NixosConfigKey(g.name)
	c := &api.NixosConfiguration{}
	if err := g.store().Get(ctx, key, c); err != nil || c.Spec.OnRemoveFlake == "" {
		return
	}
	spec := c.Spec
	spec.Flake = c.Spec.OnRemoveFlake
	gen := c.Spec.Generation + 1
	started := g.now()
	res, err := g.applier.Apply(ctx, apply.Generation{Machine: g.name, Number: gen, Spec: spec})
	rec := api.GenerationRecord{Generation: gen, Phase: api.GenerationApplied, Toplevel: res.Toplevel, Revision: spec.Revision, Message: "released: onRemoveFlake " + spec.Flake, Started: started, Finished: g.now()}
	if err != nil {
		rec.Phase, rec.Message = api.GenerationFailed, rec.Message+": "+err.Error()
		g.log.Error("onRemoveFlake failed", "flake", spec.Flake, "err", err)
	} else {
		g.log.Info("machine released", "flake", spec.Flake, "toplevel", res.Toplevel)
	}
	if err := g.store().Get(ctx, key, c); err != nil {
		return
	}
	if res.Toplevel != "" {
		c.Status.Toplevel = res.Toplevel
	}
	c.Status.UpdatedAt = rec.Finished
	c.RecordGeneration(rec)
	if err := g.store().Update(ctx, key, c); err != nil {
		g.log.Warn("release not recorded", "err", err)
	}
}

// generationOutcome is a generation's outcome as metrics counts it.
func generationOutcome(p api.GenerationPhase, rolledBack bool) string {
	switch {
	case p == api.GenerationApplied:
		return metrics.GenerationApplied
	case rolledBack:
		return metrics.GenerationRolledBack
	}
	return metrics.GenerationFailed
}

// syncHostFiles rewrites the host files of the applied generation whose
// contents changed (a renewed secret), when HostFiles is set.
func (g *generationRunner) syncHostFiles(ctx context.Context, c *api.NixosConfiguration) error {
	if g.hostFiles == nil || c.Settled() != api.GenerationApplied || c.Status.AppliedGeneration != c.Spec.Generation {
		return nil
	}
	// One read of the projection's revision per pass, not one per file:
	// the files are synced when it or the generation moved, and at least
	// every hostFilesResync (secrets from local files, a file changed by
	// hand).
	mark := hostFilesMark{generation: c.Spec.Generation, attempt: c.Spec.Attempt}
	rev, err := g.store().ModRevision(ctx, store.NodeNamedSecretsKey(g.name))
	switch {
	case err == nil:
		mark.projection = rev
	case !errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("agent: host files: %w", err)
	}
	now := g.now()
	if last := g.synced; last.same(mark) && now.Sub(last.at) < hostFilesResync {
		return nil
	}
	res, err := g.hostFiles.Sync(ctx, c.Spec.HostFiles)
	if err != nil {
		return fmt.Errorf("agent: host files of generation %d: %w", c.Spec.Generation, err)
	}
	mark.at = now
	g.synced = mark
	if len(res.Written)+len(res.Removed) > 0 {
		g.log.Info("host files synced", "generation", c.Spec.Generation, "written", res.Written, "removed", res.Removed)
	}
	return nil
}

// hostFilesResync bounds how long an applied generation's host files go
// unchecked while neither it nor the machine's projected secrets change.
const hostFilesResync = time.Minute

// hostFilesMark is what a host-file sync was made from, and when.
type hostFilesMark struct {
	generation int64
	attempt    int
	projection int64 // the projected secrets' mod revision (0: none)
	at         time.Time
}

func (m hostFilesMark) same(o hostFilesMark) bool {
	return m.generation == o.generation && m.attempt == o.attempt && m.projection == o.projection && !m.at.IsZero()
}
