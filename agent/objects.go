package agent

import (
	"context"
	"strings"

	"github.com/homystack/nico/pkg/objectapply"
)

// The flake's objects at start (docs/declared-objects.md): once the
// member serves, the agent applies the manifest, through nicoctl apply's
// checks, in one transaction, before it tells systemd it is ready.
//
//	applied / superseded by a newer manifest ...... logged
//	refused (on its own or against the cluster),
//	or etcd unreachable ............................ logged at error and in the
//	                                                 unit's status; nothing written;
//	                                                 the agent keeps running (READY)
//
// A refusal never fails the agent's start: the agent stops its member on
// the way out, and every control-plane host restarting into the same
// manifest (a deploy that also changes the agent) would stop them all,
// and the quorum with them. The unit's reload (nico-agent apply-objects),
// which a switch changing the manifest runs, fails on a refusal instead.

// applyObjects applies the manifest of the flake's objects, on a
// control-plane node, once its member serves and before the agent tells
// systemd it is ready. A manifest that orders before the one applied
// (another host switched to a newer revision first) is skipped. It
// returns what the unit's status should add ("" when applied).
func (a *Agent) applyObjects(ctx context.Context) string {
	if a.cfg.ObjectsFile == "" || !a.controlPlane() {
		return ""
	}
	log := a.log.With("file", a.cfg.ObjectsFile)
	c := &objectapply.Cluster{Store: a.store(), Client: a.client(), Health: a.cfg.DialTimeout, Now: a.Now}
	res, err := c.ApplyFile(ctx, a.cfg.ObjectsFile, a.cfg.Name)
	switch {
	case err != nil && ctx.Err() != nil:
	case err != nil:
		log.Error("the flake's objects not applied; fix them in services.nico.objects and switch (the agent keeps running)", "err", err)
		return "the flake's objects not applied: " + strings.ReplaceAll(err.Error(), "\n", " ")
	case res.Decision.Verdict == objectapply.Superseded:
		log.Warn("the flake's objects not applied: " + res.Decision.Reason)
	default:
		log.Info("the flake's objects applied", "why", res.Decision.Reason, "writes", strings.Join(res.Messages, "; "))
	}
	return ""
}
