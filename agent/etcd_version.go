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

// versionWatch is the controller that follows this node's desired etcd
// version.
func (v *supervision) versionWatch() controller.Controller {
	return &controller.Func{ControllerName: "etcd-version", Prefixes: []string{store.NodeEtcdVersionKey(v.cfg.Name)}, Resync: etcdVersionResync, Do: func(ctx context.Context) error {
		want := &api.NodeEtcdVersion{}
		err := v.store().Get(ctx, store.NodeEtcdVersionKey(v.cfg.Name), want)
		switch {
		case errors.Is(err, store.ErrNotFound):
			v.member.run.wantVersion.Store("")
		case err != nil:
			return fmt.Errorf("agent: read desired etcd version: %w", err)
		default:
			v.member.run.wantVersion.Store(want.Spec.Version)
		}
		v.signal.wake()
		return nil
	}}
}

// followVersion restarts the running member on the wanted etcd
// version, if one is wanted that it does not run. Called by the member
// supervisor only.
func (v *supervision) followVersion(ctx context.Context) error {
	want, _ := v.member.run.wantVersion.Load().(string)
	running, _ := v.member.run.version.Load().(string)
	if want == "" || want == running || want == v.member.run.failedVersion {
		return nil
	}
	vr, ok := v.member.runtime.(member.Versioned)
	if !ok {
		v.member.run.failedVersion = want
		v.reportVersionError(ctx, fmt.Sprintf("etcd %s wanted: this runtime cannot change etcd version", want))
		return nil
	}
	if err := vr.UseVersion(want); err != nil {
		v.member.run.failedVersion = want
		v.log.Warn("cannot run the wanted etcd version", "want", want, "running", running, "err", err)
		v.reportVersionError(ctx, err.Error())
		return nil
	}
	v.log.Info("restarting the member on another etcd version", "from", running, "to", want)
	v.state.setUp(false)
	if err := v.member.stop(ctx); err != nil {
		return fmt.Errorf("agent: stop member for etcd %s: %w", want, err)
	}
	err := v.member.start(ctx, "", "existing")
	if err == nil {
		v.state.setUp(true)
		v.member.run.failedVersion = ""
		v.reportVersionError(ctx, "")
		return nil
	}
	if errors.Is(err, member.ErrRemoved) {
		return exitError{err: ErrRemoved, why: "the cluster removed this member while it changed version"}
	}
	// Back to the binary that ran: the member stays up and the leader's
	// step runs into its deadline with the reason in the node's status.
	v.member.run.failedVersion = want
	v.log.Error("member did not start on the wanted etcd version; starting the previous one again", "want", want, "previous", running, "err", err)
	if uerr := vr.UseVersion(running); uerr != nil {
		return fmt.Errorf("agent: etcd %s did not start (%w) and %s is no longer available: %w", want, err, running, uerr)
	}
	if serr := v.member.start(ctx, "", "existing"); serr != nil {
		return fmt.Errorf("agent: etcd %s did not start (%w), nor %s again: %w", want, err, running, serr)
	}
	v.state.setUp(true)
	v.reportVersionError(ctx, fmt.Sprintf("etcd %s did not start: %v", want, err))
	return nil
}

// reportVersionError records why the wanted etcd version does not run
// ("" clears it) with the running version, in the node's status.
func (v *supervision) reportVersionError(ctx context.Context, msg string) {
	n, ok := v.rec.update(func(s *api.NodeStatus) { s.EtcdVersionError = msg })
	if ok {
		v.node.setPhase(ctx, n.Status.Phase, n.Status.Message)
	}
}
