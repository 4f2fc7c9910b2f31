package agent

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/store"
)

// memberRun is what the local member should run and what it runs: the
// etcd version and backend quota the cluster wants here (kept by the
// etcd-version and quota controllers) and those the member started with.
type memberRun struct {
	// wantVersion is the etcd version the leader wants here ("" none);
	// version the one the running member reported at its start.
	wantVersion, version atomic.Value
	// failedVersion is a wanted version that could not run, not tried
	// again (the member supervisor's only).
	failedVersion string
	// wantQuota is the EtcdCluster's spec.policy.quotaBackendBytes as
	// last read (-1: not read yet); quota the one the member last started
	// with (agent/etcd_quota.go).
	wantQuota, quota atomic.Int64
}

// etcdVersionResync is the etcd-version controller's resync tick, besides
// its watch.
const etcdVersionResync = 30 * time.Second

// An etcd version change reaches a node as its NodeEtcdVersion (written by
// the leader's version roll, one node at a time). The etcd-version
// controller keeps the wanted version and wakes the member supervisor,
// which owns the member's process and so alone restarts it:
//
//	wanted == running, or none wanted      nothing
//	wanted != running, runtime has it      stop (leadership handed off),
//	                                       start on the wanted binary,
//	                                       report Node.Status.EtcdVersion
//	runtime has no such binary             report EtcdVersionError; keep running
//	the wanted binary does not start       start again on the previous one,
//	                                       report EtcdVersionError; not retried
//	                                       until another version is wanted

// etcdVersionWatch is the controller that follows this node's desired etcd
// version.
func (a *Agent) etcdVersionWatch() controller.Controller {
	return &controller.Func{ControllerName: "etcd-version", Prefixes: []string{store.NodeEtcdVersionKey(a.cfg.Name)}, Resync: etcdVersionResync, Do: func(ctx context.Context) error {
		want := &api.NodeEtcdVersion{}
		err := a.store().Get(ctx, store.NodeEtcdVersionKey(a.cfg.Name), want)
		switch {
		case errors.Is(err, store.ErrNotFound):
			a.etcd.wantVersion.Store("")
		case err != nil:
			return fmt.Errorf("agent: read desired etcd version: %w", err)
		default:
			a.etcd.wantVersion.Store(want.Spec.Version)
		}
		a.supervisor.wake()
		return nil
	}}
}

// followEtcdVersion restarts the running member on the wanted etcd
// version, if one is wanted that it does not run. Called by the member
// supervisor only.
func (a *Agent) followEtcdVersion(ctx context.Context) error {
	want, _ := a.etcd.wantVersion.Load().(string)
	running, _ := a.etcd.version.Load().(string)
	if want == "" || want == running || want == a.etcd.failedVersion {
		return nil
	}
	vr, ok := a.runtime.(member.Versioned)
	if !ok {
		a.etcd.failedVersion = want
		a.reportEtcdVersionError(ctx, fmt.Sprintf("etcd %s wanted: this runtime cannot change etcd version", want))
		return nil
	}
	if err := vr.UseVersion(want); err != nil {
		a.etcd.failedVersion = want
		a.log.Warn("cannot run the wanted etcd version", "want", want, "running", running, "err", err)
		a.reportEtcdVersionError(ctx, err.Error())
		return nil
	}
	a.log.Info("restarting the member on another etcd version", "from", running, "to", want)
	a.state.setUp(false)
	if err := a.member.stop(ctx); err != nil {
		return fmt.Errorf("agent: stop member for etcd %s: %w", want, err)
	}
	err := a.member.start(ctx, "", "existing")
	if err == nil {
		a.state.setUp(true)
		a.etcd.failedVersion = ""
		a.reportEtcdVersionError(ctx, "")
		return nil
	}
	if errors.Is(err, member.ErrRemoved) {
		return exitError{err: ErrRemoved, why: "the cluster removed this member while it changed version"}
	}
	// Back to the binary that ran: the member stays up and the leader's
	// step runs into its deadline with the reason in the node's status.
	a.etcd.failedVersion = want
	a.log.Error("member did not start on the wanted etcd version; starting the previous one again", "want", want, "previous", running, "err", err)
	if uerr := vr.UseVersion(running); uerr != nil {
		return fmt.Errorf("agent: etcd %s did not start (%w) and %s is no longer available: %w", want, err, running, uerr)
	}
	if serr := a.member.start(ctx, "", "existing"); serr != nil {
		return fmt.Errorf("agent: etcd %s did not start (%w), nor %s again: %w", want, err, running, serr)
	}
	a.state.setUp(true)
	a.reportEtcdVersionError(ctx, fmt.Sprintf("etcd %s did not start: %v", want, err))
	return nil
}

// reportEtcdVersionError records why the wanted etcd version does not run
// ("" clears it) with the running version, in the node's status.
func (a *Agent) reportEtcdVersionError(ctx context.Context, msg string) {
	n, ok := a.rec.update(func(s *api.NodeStatus) { s.EtcdVersionError = msg })
	if ok {
		a.node.setPhase(ctx, n.Status.Phase, n.Status.Message)
	}
}
