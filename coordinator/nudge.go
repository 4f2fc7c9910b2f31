package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
)

// nudge writes the nudge key, fenced on leadership, at most once per
// membership.NudgeEvery: the planner asks for it while the learner it
// added does not answer although the cluster is healthy. etcd does not set
// a member's applied index when it applies a snapshot, only per entry, and
// refuses the member's own publish while its committed index is more than
// 5 000 past it; a learner that got its log as a snapshot then retries its
// publish until some entry after the snapshot is applied. This is such an
// entry. It touches only nico's own key; a failure is logged, not returned:
// the step goes on, and the next pass nudges again.
func (x *executor) nudge(ctx context.Context, s membership.Step) {
	now := x.d.now()
	last := x.d.lastNudge.Load()
	if last != 0 && now.Sub(time.Unix(0, last)) < membership.NudgeEvery {
		return
	}
	if !x.d.lastNudge.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	value := ""
	if s.Op != nil {
		value = s.Op.Metadata.Name
	}
	wctx, cancel := context.WithTimeout(ctx, x.d.admin.HealthTimeout())
	defer cancel()
	_, err := x.d.st.FencedTxn(wctx, x.d.fence, nil, store.PutValueOp(store.NudgeKey, value))
	switch {
	case err == nil:
		x.d.log.Debug("nudged the cluster with a write: the learner does not answer", "member", s.Member.String(), "op", value)
	case errors.Is(err, store.ErrNotLeader) || ctx.Err() != nil:
	default:
		x.d.log.Warn("nudging the cluster for a learner that does not answer failed", "member", s.Member.String(), "err", err)
	}
}
