// Package requests files join and removal requests in the store and waits for
// the leader's answer.
//
// A request is spec written by its filer and status written by the
// coordinator's leader. Filing never decides anything: it only asks, and the
// waiter reports what the leader answered.
//
//	RequestRemoval --> removals/<node> {Pending}
//	                        |
//	    leader: safe -------+------- unsafe --> Refused  (ErrRefused)
//	                        v
//	                     Running --(error)----> Failed   (ErrFailed)
//	                        |
//	                        v
//	                      Done
package requests

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// Sentinel errors.
var (
	// ErrRemovalPending means an unfinished removal of the node is already
	// filed; a second one is not filed over it.
	ErrRemovalPending = errors.New("requests: removal already pending")
	// ErrRefused means the leader refused the request as unsafe.
	ErrRefused = errors.New("requests: refused by the leader")
	// ErrFailed means the leader started the request and it failed.
	ErrFailed = errors.New("requests: failed")
)

// resync is how often a waiter re-reads the request besides watch events.
const resync = time.Second

// RequestRemoval files the removal of node, requested by by. An unfinished
// request for the node is left alone and ErrRemovalPending returned; a
// finished one is replaced by the new request, with a fresh status.
func RequestRemoval(ctx context.Context, st *store.Store, node string, force bool, by string) (*api.RemoveRequest, error) {
	return requestRemoval(ctx, st, node, by, func(s *api.RemoveRequestSpec) { s.Force = force })
}

// RequestStandby files the removal of node's member, keeping the node as a
// standby (api.RemoveRequestSpec.Standby), as RequestRemoval does.
func RequestStandby(ctx context.Context, st *store.Store, node string, by string) (*api.RemoveRequest, error) {
	return requestRemoval(ctx, st, node, by, func(s *api.RemoveRequestSpec) { s.Standby = true })
}

func requestRemoval(ctx context.Context, st *store.Store, node, by string, set func(*api.RemoveRequestSpec)) (*api.RemoveRequest, error) {
	if node == "" {
		return nil, errors.New("requests: removal: node name is empty")
	}
	for {
		r := api.NewRemoveRequest(node)
		r.Metadata.CreatedAt = time.Now().UTC()
		set(&r.Spec)
		r.Spec.RequestedBy = by

		old := &api.RemoveRequest{}
		err := st.Get(ctx, store.RemovalKey(node), old)
		switch {
		case errors.Is(err, store.ErrNotFound):
			err = st.CreateObject(ctx, r)
		case err != nil:
			return nil, fmt.Errorf("requests: removal of %s: %w", node, err)
		case !old.Status.Phase.Finished():
			return old, fmt.Errorf("%w: %s (phase %s, requested by %q at %s)", ErrRemovalPending, node,
				PhaseName(old.Status.Phase), old.Spec.RequestedBy, old.Metadata.CreatedAt.Format(time.RFC3339))
		default:
			r.Metadata.Revision = old.Metadata.Revision
			err = st.UpdateObject(ctx, r)
		}
		switch {
		case err == nil:
			return r, nil
		case errors.Is(err, store.ErrExists), errors.Is(err, store.ErrConflict):
			// Someone wrote the key between our read and write: read again.
			if ctx.Err() != nil {
				return nil, fmt.Errorf("requests: removal of %s: %w", node, ctx.Err())
			}
			continue
		default:
			return nil, fmt.Errorf("requests: removal of %s: %w", node, err)
		}
	}
}

// WaitRemoval waits until the removal of node is finished and returns it.
// It re-reads the request on every watch event and every second, and calls
// progress (when not nil) with the request each time its phase changes,
// starting with the first read. A refused or failed removal is returned
// with an error wrapping ErrRefused or ErrFailed and the leader's message.
func WaitRemoval(ctx context.Context, st *store.Store, node string, progress func(*api.RemoveRequest)) (*api.RemoveRequest, error) {
	key := store.RemovalKey(node)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := st.Watch(wctx, key, 0)
	tick := time.NewTicker(resync)
	defer tick.Stop()

	first := true
	var last api.RemovePhase
	for {
		r := &api.RemoveRequest{}
		err := st.Get(ctx, key, r)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, fmt.Errorf("requests: removal of %s: the request was deleted before it finished: %w", node, err)
		case err != nil && ctx.Err() != nil && first:
			return nil, fmt.Errorf("requests: removal of %s: %w", node, ctx.Err())
		case err != nil && ctx.Err() != nil:
			return nil, fmt.Errorf("requests: removal of %s: still %s: %w", node, PhaseName(last), ctx.Err())
		case err != nil:
			// A read can fail while the cluster changes; the next tick retries.
		default:
			if first || r.Status.Phase != last {
				first, last = false, r.Status.Phase
				if progress != nil {
					progress(r)
				}
			}
			if r.Status.Phase.Finished() {
				return r, outcome(node, r)
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("requests: removal of %s: still %s: %w", node, PhaseName(last), ctx.Err())
		case _, ok := <-events:
			if !ok {
				// The watch ended (compaction, lost leader): poll until
				// the next tick opens a new one.
				events = nil
			}
		case <-tick.C:
			if events == nil {
				events = st.Watch(wctx, key, 0)
			}
		}
	}
}

// outcome turns a finished request into its error.
func outcome(node string, r *api.RemoveRequest) error {
	switch r.Status.Phase {
	case api.RemoveRefused:
		return fmt.Errorf("%w: removal of %s: %s", ErrRefused, node, r.Status.Message)
	case api.RemoveFailed:
		return fmt.Errorf("%w: removal of %s (operation %s): %s", ErrFailed, node, r.Status.Operation, r.Status.Message)
	default:
		return nil
	}
}

// PhaseName names a removal phase for people ("Pending" for the empty one).
func PhaseName(p api.RemovePhase) string {
	if p == api.RemovePending {
		return "Pending"
	}
	return string(p)
}
