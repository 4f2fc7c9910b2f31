package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/homystack/nico/pkg/objectapply"
)

// ErrObjectsRefused is returned by Run when the flake's objects
// (Config.ObjectsFile) were refused when the agent started: nothing of
// them was written, and the start fails with the refusal.
var ErrObjectsRefused = errors.New("agent: the flake's objects were refused, nothing written")

// applyObjects applies the manifest of the flake's objects, on a
// control-plane node, once its member serves and before the agent tells
// systemd it is ready: a refused manifest fails the start, naming the
// field, the value and what is accepted. A manifest that orders before
// the one applied (another host switched to a newer revision first) is
// skipped, not refused (docs/declared-objects.md).
func (a *Agent) applyObjects(ctx context.Context) error {
	if a.cfg.ObjectsFile == "" || !a.controlPlane() {
		return nil
	}
	c := &objectapply.Cluster{Store: a.store(), Client: a.client(), Health: a.cfg.DialTimeout, Now: a.Now}
	res, err := c.ApplyFile(ctx, a.cfg.ObjectsFile, a.cfg.Name)
	var invalid *objectapply.InvalidError
	var refused *objectapply.RefusedError
	if errors.As(err, &invalid) || errors.As(err, &refused) {
		return fmt.Errorf("%w: %w", ErrObjectsRefused, err)
	}
	if err != nil {
		return fmt.Errorf("agent: applying the flake's objects %s: %w", a.cfg.ObjectsFile, err)
	}
	log := a.log.With("file", a.cfg.ObjectsFile)
	if res.Decision.Verdict == objectapply.Superseded {
		log.Warn("the flake's objects not applied: " + res.Decision.Reason)
		return nil
	}
	log.Info("the flake's objects applied", "why", res.Decision.Reason, "writes", strings.Join(res.Messages, "; "))
	return nil
}
