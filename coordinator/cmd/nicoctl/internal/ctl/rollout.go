package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	"gopkg.in/yaml.v3"
)

// rolloutStartOpts are the flags of rollout start.
type rolloutStartOpts struct {
	file           string
	tmpl           api.NixosConfigurationSpec
	operation      string
	maxUnavailable string
	cpFirst        bool
	stepTimeout    time.Duration
	nodes          []string
	paused         bool
}

func (a *app) rolloutCmd() *cobra.Command {
	var so rolloutStartOpts
	start := &cobra.Command{
		Use:   "start NAME",
		Short: "Start rolling a NixOS configuration across the fleet",
		Long: `Start a rollout: every node (or --nodes) gets the configuration, data plane
first (--max-unavailable at a time), then the control plane one node at a time
with the etcd leader last. -f reads the rollout's spec from a YAML file
(template, nodes, maxUnavailable, controlPlaneFirst, stepTimeout, paused).`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error { return a.rolloutStart(cmd.Context(), args[0], so) }),
	}
	f := start.Flags()
	f.StringVarP(&so.file, "file", "f", "", "YAML file with the rollout's spec")
	f.StringVar(&so.tmpl.GitRepo, "git-repo", "", "the flake's repository")
	f.StringVar(&so.tmpl.Ref, "ref", "", "branch or tag (when no revision)")
	f.StringVar(&so.tmpl.Revision, "revision", "", "exact commit")
	f.StringVar(&so.tmpl.Flake, "flake", "", "#attr under nixosConfigurations (the node's name when empty)")
	f.StringVar(&so.tmpl.ConfigurationSubdir, "configuration-subdir", "", "the flake's directory in the repository")
	f.StringVar(&so.tmpl.CredentialsRef, "credentials-ref", "", "secret with the repository's credentials")
	f.StringVar(&so.operation, "operation", "switch", "switch, boot or test")
	f.StringVar(&so.maxUnavailable, "max-unavailable", "1", "data-plane nodes at a time: a number or a percentage")
	f.BoolVar(&so.cpFirst, "control-plane-first", false, "roll the control plane first (Kubernetes version skew)")
	f.DurationVar(&so.stepTimeout, "step-timeout", 10*time.Minute, "how long one node may take to apply and be healthy")
	f.StringSliceVar(&so.nodes, "nodes", nil, "only these nodes (registered nodes: an unknown one is refused and nothing is written)")
	f.BoolVar(&so.paused, "paused", false, "create it paused")

	var watch bool
	status := &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show a rollout's progress (the newest rollout by default)",
		Long: `Show nodes done of total, the current node, the elapsed time, an estimate and
what the rollout does or waits for now (a change waiting for the one-change slot, an
unhealthy etcd cluster, a node down).
With -w it follows the rollout until it ends: a progress bar on a terminal,
plain lines otherwise; exit 0 when it succeeded or was undone, 1 when halted.`,
		Args: cobra.MaximumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return a.rolloutStatus(cmd.Context(), first(args), watch)
		}),
	}
	status.Flags().BoolVarP(&watch, "watch", "w", false, "follow the rollout until it ends")
	edit := func(use, short string, fn func(*api.Rollout) error) *cobra.Command {
		return &cobra.Command{Use: use + " [NAME]", Short: short, Args: cobra.MaximumNArgs(1),
			RunE: runE(func(cmd *cobra.Command, args []string) error {
				return a.rolloutEdit(cmd.Context(), first(args), use, fn)
			})}
	}
	pause := edit("pause", "Start no new step (the step in flight finishes)", func(r *api.Rollout) error { r.Spec.Paused = true; return nil })
	resume := edit("resume", "Resume a paused rollout", func(r *api.Rollout) error { r.Spec.Paused = false; return nil })
	undo := edit("undo", "Roll every node the rollout touched back to what it had", func(r *api.Rollout) error {
		if r.Status.Phase == api.RolloutUndone {
			return withCode(ExitFailed, fmt.Errorf("rollout %s is already undone", r.Metadata.Name))
		}
		r.Spec.Undo, r.Spec.Paused = true, false
		return nil
	})
	return group("rollout", "Roll NixOS generations across the fleet", "rollout: start, status, pause, resume, undo", start, status, pause, resume, undo)
}

func first(args []string) string {
	if len(args) > 0 {
		return args[0]
	}
	return ""
}

func (a *app) rolloutStart(ctx context.Context, name string, o rolloutStartOpts) error {
	r := api.NewRollout(name)
	if o.file != "" {
		spec, err := readRolloutSpec(o.file)
		if err != nil {
			return withCode(ExitUsage, err)
		}
		r.Spec = spec
	} else {
		o.tmpl.Operation = api.ActivationOp(o.operation)
		r.Spec = api.RolloutSpec{Template: o.tmpl, Nodes: o.nodes, MaxUnavailable: o.maxUnavailable, ControlPlaneFirst: o.cpFirst, StepTimeout: api.Duration(o.stepTimeout), Paused: o.paused}
	}
	if r.Spec.Template.GitRepo == "" {
		return withCode(ExitUsage, errors.New("template.gitRepo (--git-repo): the flake's repository is required"))
	}
	if !r.Spec.Template.Operation.Valid() {
		return withCode(ExitUsage, fmt.Errorf("operation %q: want switch, boot or test", r.Spec.Template.Operation))
	}
	if _, err := r.Spec.BatchSize(1); err != nil {
		return withCode(ExitUsage, err)
	}
	r.Metadata.CreatedAt = a.now()
	return a.withCluster(ctx, func(ctx context.Context, c *cluster) error {
		if err := checkRolloutNodes(ctx, c, r.Spec.Nodes); err != nil {
			return err
		}
		if err := c.st.CreateObject(ctx, r); err != nil {
			if errors.Is(err, store.ErrExists) {
				return withCode(ExitFailed, fmt.Errorf("rollout %s exists", name))
			}
			return withCode(ExitFailed, err)
		}
		fmt.Fprintf(a.stdout, "rollout %s started; follow it with 'nicoctl rollout status -w %s'\n", name, name)
		return nil
	})
}

// checkRolloutNodes refuses, before anything is written, a node list
// naming a node that is not registered: the coordinator would halt such a
// rollout at once.
func checkRolloutNodes(ctx context.Context, c *cluster, names []string) error {
	if len(names) == 0 {
		return nil
	}
	nodes, _, err := store.List[api.Node](ctx, c.st, store.NodesDir)
	if err != nil {
		return fmt.Errorf("reading the registered nodes: %w", err)
	}
	known := make([]string, 0, len(nodes))
	for _, n := range nodes {
		known = append(known, n.Metadata.Name)
	}
	var unknown []string
	for _, n := range names {
		if !slices.Contains(known, n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(known)
	accepted := strings.Join(known, ", ")
	if accepted == "" {
		accepted = "none is registered"
	}
	return withCode(ExitUsage, fmt.Errorf("nodes (--nodes): %s not registered; want registered nodes: %s; nothing written",
		strings.Join(unknown, ", "), accepted))
}

// readRolloutSpec reads a YAML spec with the JSON field names.
func readRolloutSpec(path string) (api.RolloutSpec, error) {
	var spec api.RolloutSpec
	b, err := os.ReadFile(path)
	if err != nil {
		return spec, err
	}
	var doc any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return spec, fmt.Errorf("%s: %w", path, err)
	}
	j, err := json.Marshal(doc)
	if err != nil {
		return spec, fmt.Errorf("%s: %w", path, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(j)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return spec, fmt.Errorf("%s: %w", path, err)
	}
	return spec, nil
}

// findRollout reads rollout name, or the newest one when name is empty.
func findRollout(ctx context.Context, c *cluster, name string) (*api.Rollout, error) {
	if name != "" {
		r := &api.Rollout{}
		if err := c.st.Get(ctx, store.RolloutKey(name), r); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return nil, withCode(ExitNotFound, fmt.Errorf("no rollout %s", name))
			}
			return nil, withCode(ExitFailed, err)
		}
		return r, nil
	}
	all, _, err := store.List[api.Rollout](ctx, c.st, store.RolloutsDir)
	if err != nil {
		return nil, withCode(ExitFailed, err)
	}
	if len(all) == 0 {
		return nil, withCode(ExitNotFound, errors.New("no rollout"))
	}
	return slices.MaxFunc(all, func(a, b *api.Rollout) int { return a.Metadata.CreatedAt.Compare(b.Metadata.CreatedAt) }), nil
}

func (a *app) rolloutEdit(ctx context.Context, name, verb string, fn func(*api.Rollout) error) error {
	return a.withCluster(ctx, func(ctx context.Context, c *cluster) error {
		for {
			r, err := findRollout(ctx, c, name)
			if err != nil {
				return err
			}
			if r.Status.Phase.Finished() {
				return withCode(ExitFailed, fmt.Errorf("rollout %s has finished (%s)", r.Metadata.Name, r.Status.Phase))
			}
			if err := fn(r); err != nil {
				return err
			}
			err = c.st.UpdateObject(ctx, r)
			if errors.Is(err, store.ErrConflict) {
				continue
			}
			if err != nil {
				return withCode(ExitFailed, err)
			}
			fmt.Fprintf(a.stdout, "rollout %s: %s requested\n", r.Metadata.Name, verb)
			return nil
		}
	})
}

func (a *app) rolloutStatus(ctx context.Context, name string, watch bool) error {
	if !watch {
		return a.withCluster(ctx, func(ctx context.Context, c *cluster) error {
			r, err := findRollout(ctx, c, name)
			if err != nil {
				return err
			}
			return a.emit(r, func(w io.Writer) {
				fmt.Fprintln(w, rolloutLine(r, a.now()))
				fmt.Fprintln(w, "NODE\tROLE\tPHASE\tGENERATION\tMESSAGE")
				for _, n := range r.Status.Nodes {
					role := "data"
					if n.ControlPlane {
						role = "control"
					}
					ph := string(n.Phase)
					if ph == "" {
						ph = "Pending"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", n.Name, role, ph, n.Generation, n.Message)
				}
			})
		})
	}
	return a.watchRollout(ctx, name)
}

// watchRollout follows a rollout until it ends: it reads the rollout, then
// re-reads it on every change a watch on its key reports (from the revision
// it read, so no change is missed), drawing a progress bar on a terminal
// (redrawn each second for the elapsed time) and a line per change
// otherwise.
func (a *app) watchRollout(ctx context.Context, name string) error {
	c, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	read := func() (*api.Rollout, error) {
		rctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
		defer cancel()
		return findRollout(rctx, c, name)
	}
	r, err := read()
	if err != nil {
		return err
	}
	name = r.Metadata.Name
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := c.st.Watch(wctx, store.RolloutKey(name), r.Metadata.Revision+1)
	p := newRolloutProgress(a.stdout, isTerminal(a.stdout))
	defer p.close()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		p.show(r, a.now())
		switch r.Status.Phase {
		case api.RolloutSucceeded, api.RolloutUndone:
			return nil
		case api.RolloutHalted:
			if !r.Spec.Undo {
				p.close()
				return withCode(ExitFailed, fmt.Errorf("rollout %s halted at %s: %s", name, r.Status.HaltedNode, r.Status.HaltedReason))
			}
		}
		select {
		case <-ctx.Done():
			return withCode(ExitFailed, ctx.Err())
		case <-tick.C:
			continue // redraw the elapsed time; nothing is read
		case resp, ok := <-events:
			if !ok || resp.Err() != nil {
				// A closed or failed watch (compaction, a lost member):
				// read again and watch from what was read.
				if err := ctx.Err(); err != nil {
					return withCode(ExitFailed, err)
				}
				if r, err = read(); err != nil {
					return err
				}
				events = c.st.Watch(wctx, store.RolloutKey(name), r.Metadata.Revision+1)
				continue
			}
		}
		if r, err = read(); err != nil {
			return err
		}
	}
}

// rolloutLine is one line of a rollout's progress: phase, nodes done of
// total, the current node, elapsed time and an estimate of what is left.
func rolloutLine(r *api.Rollout, now time.Time) string {
	done, total := r.Counts()
	var b strings.Builder
	phase := string(r.Status.Phase)
	if phase == "" {
		if total == 0 {
			// Not planned yet: no node count to show.
			return r.Metadata.Name + " waiting for the coordinator leader to list the nodes it will roll"
		}
		phase = "Pending"
	}
	fmt.Fprintf(&b, "%s %s %d/%d nodes", r.Metadata.Name, phase, done, total)
	if len(r.Status.Current) > 0 {
		fmt.Fprintf(&b, ", current %s", strings.Join(r.Status.Current, ","))
	}
	if !r.Status.StartedAt.IsZero() {
		end := now
		if !r.Status.FinishedAt.IsZero() {
			end = r.Status.FinishedAt
		}
		elapsed := end.Sub(r.Status.StartedAt).Round(time.Second)
		fmt.Fprintf(&b, ", elapsed %s", elapsed)
		if done > 0 && done < total && r.Status.FinishedAt.IsZero() {
			left := time.Duration(int64(elapsed) / int64(done) * int64(total-done)).Round(time.Second)
			fmt.Fprintf(&b, ", about %s left", left)
		}
	}
	switch {
	case r.Status.Phase == api.RolloutHalted:
		fmt.Fprintf(&b, ", halted at %s: %s", r.Status.HaltedNode, r.Status.HaltedReason)
	case !r.Status.Phase.Finished() && r.Status.Message != "":
		fmt.Fprintf(&b, "; %s", oneLine(r.Status.Message))
	}
	return b.String()
}

// bar draws done/total as a bar of width cells (plain output).
func bar(r *api.Rollout, width int) string {
	done, total := r.Counts()
	fill := 0
	if total > 0 {
		fill = done * width / total
	}
	return "[" + strings.Repeat("#", fill) + strings.Repeat(".", width-fill) + "]"
}

// isTerminal tells whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
