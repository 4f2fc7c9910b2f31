package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/homystack/nico/pkg/backoff"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// heartbeat keeps the node's heartbeat key alive on a lease, granting a new
// lease whenever the old one is lost, until ctx ends; then it revokes the
// lease so the coordinator sees the node go at once.
func (a *Agent) heartbeat(ctx context.Context) {
	b := backoff.Backoff{Base: 200 * time.Millisecond, Max: a.cfg.HeartbeatTTL / 2, Factor: 2, Jitter: 0.5}
	for attempt := 0; ; attempt++ {
		err := a.holdLease(ctx)
		if ctx.Err() != nil {
			return
		}
		a.log.Warn("heartbeat lease lost; renewing", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(b.Delay(attempt)):
		}
	}
}

func (a *Agent) holdLease(ctx context.Context) error {
	lease, err := a.cli.Grant(ctx, int64(a.cfg.HeartbeatTTL/time.Second))
	if err != nil {
		return fmt.Errorf("grant: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_, _ = a.cli.Revoke(rctx, lease.ID)
	}()
	if _, err := a.cli.Put(ctx, store.HeartbeatKey(a.cfg.Name), a.Now().UTC().Format(time.RFC3339Nano), clientv3.WithLease(lease.ID)); err != nil {
		return fmt.Errorf("put heartbeat: %w", err)
	}
	a.nodeMu.Lock()
	if a.node != nil {
		a.node.Status.Lease = int64(lease.ID)
	}
	a.nodeMu.Unlock()
	ch, err := a.cli.KeepAlive(ctx, lease.ID)
	if err != nil {
		return fmt.Errorf("keepalive: %w", err)
	}
	for range ch {
	}
	return errors.New("keepalive channel closed")
}
