package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// heartbeat is the controller that keeps the node's heartbeat key alive on
// a lease. It watches the key: when the lease is lost (it expired, the
// key went with it), it grants a new lease and writes the key again; a
// slow resync tick checks the same. When its context ends, it revokes the lease
// so the coordinator sees the node go at once; wait waits for that.
//
//	reconcile: lease lost? --yes--> grant, keep alive --> key missing or on another lease? --yes--> put on the lease
type heartbeat struct {
	node string        // the node's name
	ttl  time.Duration // the lease's
	now  func() time.Time
	log  *slog.Logger
	// conn is the agent's store client and store, which an identity
	// switch replaces.
	conn func() *connection
	rec  *nodeRecord // takes the lease, for the node's status

	mu    sync.Mutex
	lease clientv3.LeaseID // 0: none
	lost  chan struct{}    // closed when the lease's keep-alive ended
	kept  sync.WaitGroup   // the keep-alive drains, each revoking its lease
}

// newHeartbeat is the heartbeat of a's node.
func (a *Agent) newHeartbeat() *heartbeat {
	return &heartbeat{node: a.cfg.Name, ttl: a.cfg.HeartbeatTTL, now: func() time.Time { return a.Now() }, log: a.log, conn: a.conn.Load, rec: &a.rec}
}

func (h *heartbeat) Name() string { return "heartbeat" }

func (h *heartbeat) Watches() []string { return []string{store.HeartbeatKey(h.node)} }

// ResyncInterval is heartbeatResync: the watch answers a lost key at once
// (a lease that ends takes its key along), so the tick is a safety net.
func (h *heartbeat) ResyncInterval() time.Duration { return heartbeatResync }

// heartbeatResync is how often the heartbeat reads its key besides the
// watch. The lease's keep-alive is clientv3's, at a third of the TTL; a
// read per keep-alive would be 300 reads a second into etcd from 1 000
// idle machines.
const heartbeatResync = time.Minute

func (h *heartbeat) Reconcile(ctx context.Context) error {
	st := h.conn().st
	lease, fresh, err := h.keep(ctx)
	if err != nil {
		return err
	}
	// A lease granted just now holds no key yet: the key is written at
	// once, without reading where it is.
	if !fresh {
		held, ok, err := st.HeartbeatLease(ctx, h.node)
		if err != nil {
			return fmt.Errorf("agent: heartbeat: read: %w", err)
		}
		if ok && held == lease {
			return nil
		}
	}
	if err := st.PutHeartbeat(ctx, h.node, h.now(), lease); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			h.forget(lease)
		}
		return fmt.Errorf("agent: heartbeat: put: %w", err)
	}
	h.rec.setLease(int64(lease))
	return nil
}

// keep returns the lease kept alive, granting a new one (fresh) when
// there is none or it was lost. The keep-alive lasts as long as ctx (the
// controller's run), and revokes the lease when it ends.
func (h *heartbeat) keep(ctx context.Context) (lease clientv3.LeaseID, fresh bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lease != 0 {
		select {
		case <-h.lost:
			h.log.Warn("heartbeat lease lost; renewing", "lease", h.lease)
			h.lease = 0
		default:
			return h.lease, false, nil
		}
	}
	cli := h.conn().cli
	g, err := cli.Grant(ctx, int64(h.ttl/time.Second))
	if err != nil {
		return 0, false, fmt.Errorf("agent: heartbeat: grant: %w", err)
	}
	ch, err := cli.KeepAlive(ctx, g.ID)
	if err != nil {
		h.revoke(ctx, g.ID)
		return 0, false, fmt.Errorf("agent: heartbeat: keepalive: %w", err)
	}
	lost := make(chan struct{})
	h.lease, h.lost = g.ID, lost
	h.kept.Add(1)
	go func() {
		defer h.kept.Done()
		for range ch {
		}
		close(lost)
		h.revoke(ctx, g.ID)
	}()
	return g.ID, true, nil
}

// forget drops lease, which etcd no longer has.
func (h *heartbeat) forget(lease clientv3.LeaseID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lease == lease {
		h.lease = 0
	}
}

// revoke revokes lease, also after ctx ended, within a bound.
func (h *heartbeat) revoke(ctx context.Context, lease clientv3.LeaseID) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_, _ = h.conn().cli.Revoke(rctx, lease)
}

// wait waits until every lease the heartbeat kept was revoked (or found
// lost), once its controller stopped.
func (h *heartbeat) wait() { h.kept.Wait() }

// firstLease grants the heartbeat's lease of a joining node before it
// registers, kept alive under ctx (cancelled when the heartbeat stops),
// for etcdJoin.registerAndRequest to write the heartbeat along (heartbeatOp).
func (a *Agent) firstLease(ctx context.Context, h *heartbeat) error {
	lease, _, err := h.keep(ctx)
	if err != nil {
		return err
	}
	a.rec.setLease(int64(lease))
	return nil
}
