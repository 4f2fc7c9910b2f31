package ctl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/objectapply"
	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/cobra"
)

// deleteOpts are the flags of delete cluster.
type deleteOpts struct {
	force       bool
	wait        bool
	waitTimeout time.Duration
}

// waitResync is how often a wait re-reads the object when no watch event
// came (a lost watch).
const waitResync = 2 * time.Second

// deleteCmd is `nicoctl delete cluster NAME [--wait]`.
func (a *app) deleteCmd() *cobra.Command {
	var o deleteOpts
	cl := &cobra.Command{
		Use:     "cluster NAME",
		Aliases: []string{"clusters", "kubernetescluster", "kc"},
		Short:   "Mark a KubernetesCluster for deletion (--wait: and wait until it is gone)",
		Long: `Mark KubernetesCluster NAME for deletion (metadata.deletionTimestamp). The
cluster controller then moves it to phase Deleting: its machines' configurations
are replaced by their onRemoveFlake and the machines released, its secrets,
etcd user, role and prefix deleted, and finally the object itself. Marking an
object already marked changes nothing.

With --wait nicoctl waits until the object is gone, printing the phase, the
machines still held and the controller's message as they change.

A cluster the flake declares (services.nico.objects) is refused with 3
unless --force: remove it from the flake, with kubernetesClusterRemoval
delete (docs/declared-objects.md).

Exit codes: 0 marked (with --wait: gone), 3 declared in the flake, 4 no such cluster, 1 the wait
ended (--wait-timeout) before the cluster was gone (it stays marked), 2 no
cluster to reach.`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error { return a.deleteCluster(cmd.Context(), args[0], o) }),
	}
	cl.Flags().BoolVar(&o.wait, "wait", false, "wait until the cluster is gone")
	cl.Flags().BoolVar(&o.force, "force", false, "delete a cluster the flake declares (services.nico.objects); remove it from the flake instead")
	cl.Flags().DurationVar(&o.waitTimeout, "wait-timeout", 30*time.Minute, "how long --wait waits")
	return group("delete", "Delete objects", "delete: cluster", cl)
}

func (a *app) deleteCluster(ctx context.Context, name string, o deleteOpts) error {
	rctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	c, err := a.connect(rctx)
	if err != nil {
		return err
	}
	defer c.Close()
	kc, err := markDeletion(rctx, c.st, name, a.now().UTC(), o.force)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "KubernetesCluster %s marked for deletion at %s\n", name, kc.Metadata.DeletionTimestamp.UTC().Format(time.RFC3339))
	if !o.wait {
		return nil
	}
	wctx, wcancel := context.WithTimeout(ctx, o.waitTimeout)
	defer wcancel()
	err = waitClusterGone(wctx, c.st, name, func(s string) { fmt.Fprintln(a.stdout, s) })
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return withCode(ExitFailed, fmt.Errorf("KubernetesCluster %s not gone within %s (--wait-timeout); it stays marked, follow it with 'nicoctl describe cluster %s': %w", name, o.waitTimeout, name, err))
	}
	return err
}

// markDeletion sets the cluster's deletion timestamp (once; a marked
// cluster keeps its first), with compare-and-swap; a cluster the flake
// declares only with force.
func markDeletion(ctx context.Context, st *store.Store, name string, now time.Time, force bool) (*api.KubernetesCluster, error) {
	for {
		kc, err := getKubernetesCluster(ctx, st, name)
		if err != nil {
			return nil, err
		}
		if kc.Metadata.DeletionTimestamp != nil {
			return kc, nil
		}
		if kc.Metadata.Declared != nil && !force {
			return nil, withCode(ExitRefused, objectapply.OwnedError(kc))
		}
		kc.Metadata.DeletionTimestamp = &now
		err = st.UpdateObject(ctx, kc)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("marking KubernetesCluster %s for deletion: %w", name, err)
		}
		return kc, nil
	}
}

// waitClusterGone waits until the cluster's key is deleted, calling
// progress with a line whenever what it shows changes. It reads on every
// watch event and every waitResync (a watch can end: compaction, a lost
// leader).
func waitClusterGone(ctx context.Context, st *store.Store, name string, progress func(string)) error {
	key := store.ClusterKey(name)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch := st.Watch(wctx, key, 0)
	tick := time.NewTicker(waitResync)
	defer tick.Stop()
	last := ""
	for {
		kc := &api.KubernetesCluster{}
		err := st.Get(ctx, key, kc)
		switch {
		case errors.Is(err, store.ErrNotFound):
			progress(fmt.Sprintf("KubernetesCluster %s deleted", name))
			return nil
		case err != nil && ctx.Err() != nil:
			return fmt.Errorf("waiting for KubernetesCluster %s to go: %w", name, ctx.Err())
		case err != nil:
			// A read can fail while the cluster changes; the next tick retries.
		default:
			if line := deletionProgress(kc); line != last {
				last = line
				progress(line)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for KubernetesCluster %s to go: %w", name, ctx.Err())
		case _, ok := <-watch:
			if !ok {
				watch = nil // poll until the next tick
			}
		case <-tick.C:
			if watch == nil {
				watch = st.Watch(wctx, key, 0)
			}
		}
	}
}

// deletionProgress is one line of where a deletion is.
func deletionProgress(kc *api.KubernetesCluster) string {
	st := kc.Status
	phase := string(st.Phase)
	if phase == "" || (st.Phase != api.ClusterDeleting && kc.Deleting()) {
		phase = "waiting for the controller (phase " + orDash(phase) + ")"
	}
	held := len(st.ControlPlane.Machines) + len(st.DataPlane.Machines)
	s := fmt.Sprintf("%s: %s, %d machines held (control plane %d, data plane %d)", kc.Metadata.Name, phase, held,
		len(st.ControlPlane.Machines), len(st.DataPlane.Machines))
	if st.Message != "" {
		s += ": " + oneLine(st.Message)
	}
	return s
}
