package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
)

// snapshotBefore takes the snapshot a membership change starts with
// (coordinator/snapshots.go). It returns the line the operation's journal
// gets, or held when the change must wait: the reason is then written to
// the request's status message (fenced), nothing else is.
func (x *executor) snapshotBefore(ctx context.Context, s membership.Step) (note string, held bool, err error) {
	what := fmt.Sprintf("%s of %s", strings.ToLower(string(s.Op.Spec.Type)), s.Op.Spec.Node)
	note, err = x.d.snaps.before(ctx, x.d.fence, x.obs.cluster, what)
	if !errors.Is(err, errSnapshotHeld) {
		return note, false, err
	}
	msg := err.Error()
	x.d.log.Warn("membership change waits for a snapshot", "op", s.Op.Metadata.Name, "node", s.Op.Spec.Node, "err", err)
	var obj api.Object
	switch s.Action {
	case membership.StartJoin:
		if j := x.obs.joins[s.Request]; j != nil && j.Status.Message != msg {
			j.Status.Message, j.Status.UpdatedAt = msg, x.now
			obj = j
		}
	case membership.StartRemove:
		if r := x.obs.removals[s.Request]; r != nil && r.Status.Message != msg {
			r.Status.Message, r.Status.UpdatedAt = msg, x.now
			obj = r
		}
	}
	if obj == nil {
		return "", true, nil
	}
	return "", true, x.commit(ctx, nil, obj)
}
