package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/rollout"
	"github.com/homystack/nico/pkg/store"
)

// snapshotBefore takes the snapshot a control-plane rollout step starts
// with (coordinator/snapshots.go); a data-plane step takes none. It
// returns the line the step's operation journals, or held when the step
// must wait: the reason is then the rollout's status message (fenced,
// compare-and-swapped), and no configuration is written.
func (r *rollouter) snapshotBefore(ctx context.Context, ro *api.Rollout, obs rollout.Observed, s rollout.Step, now time.Time) (string, bool, error) {
	cp := false
	for _, n := range obs.Nodes {
		for _, name := range s.Nodes {
			if n.Name == name && n.ControlPlane {
				cp = true
			}
		}
	}
	if !cp {
		return "", false, nil
	}
	ec := &api.EtcdCluster{}
	if err := r.st.Get(ctx, store.EtcdClusterKey, ec); errors.Is(err, store.ErrNotFound) {
		return "", false, nil
	} else if err != nil {
		return "", false, err
	}
	what := fmt.Sprintf("rollout %s step %d (%s)", ro.Metadata.Name, ro.Status.Step+1, strings.Join(s.Nodes, ","))
	note, err := r.snaps.before(ctx, r.fence, ec, what)
	if !errors.Is(err, errSnapshotHeld) {
		return note, false, err
	}
	r.log.Warn("rollout step waits for a snapshot", "rollout", ro.Metadata.Name, "nodes", s.Nodes, "err", err)
	if ro.Status.Message == err.Error() {
		return "", true, nil
	}
	ro.Status.Message, ro.Status.UpdatedAt = err.Error(), now
	_, werr := r.st.PutUnchanged(ctx, r.fence, ro)
	return "", true, werr
}
