package enroll

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// NonceStore remembers the nonces of accepted join requests for every join
// endpoint of the cluster (ServerConfig.Nonces): a request captured on its
// way to one endpoint and replayed to another is refused there too.
type NonceStore interface {
	// First records nonce for ttl and tells whether no endpoint recorded
	// it before within its ttl.
	First(ctx context.Context, nonce string, ttl time.Duration) (bool, error)
}

// ReplayWindow is how long a nonce is remembered: a request older than
// MaxSkew is refused for its time anyway, and clocks may differ by as much
// again.
const ReplayWindow = 2 * MaxSkew

// EtcdNonces is the NonceStore of a cluster: one key per nonce under
// store.JoinNoncesDir, created only if absent and bound to a lease of the
// window, so etcd forgets it by itself.
type EtcdNonces struct {
	st    *store.Store
	lease clientv3.Lease
}

// NewEtcdNonces returns the nonce store of the cluster st reaches.
func NewEtcdNonces(st *store.Store) *EtcdNonces {
	return &EtcdNonces{st: st, lease: st.Client().Lease}
}

// First implements NonceStore with one lease grant and a put-if-absent
// transaction. The key is the nonce's SHA-256, so any nonce makes a
// well-formed key.
func (e *EtcdNonces) First(ctx context.Context, nonce string, ttl time.Duration) (bool, error) {
	sum := sha256.Sum256([]byte(nonce))
	key := store.JoinNonceKey(hex.EncodeToString(sum[:]))
	secs := int64((ttl + time.Second - 1) / time.Second)
	l, err := e.lease.Grant(ctx, max(secs, 1))
	if err != nil {
		return false, fmt.Errorf("join: nonce lease: %w", err)
	}
	_, err = e.st.Txn(ctx, []clientv3.Cmp{store.Absent(key)}, store.PutLeasedOp(key, "", l.ID))
	seen := errors.Is(err, store.ErrConflict)
	if seen {
		err = nil
	}
	if err != nil || seen {
		// The unused lease would expire anyway; revoking it is tidier.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		_, _ = e.lease.Revoke(rctx, l.ID)
		cancel()
	}
	if err != nil {
		return false, fmt.Errorf("join: record nonce: %w", err)
	}
	return !seen, nil
}

// HeartbeatOf returns the ServerConfig.NodeAlive check of the cluster st
// reaches: node name is alive while its lease-bound heartbeat key
// (store.HeartbeatKey) exists; its value is the time the agent wrote it.
func HeartbeatOf(st *store.Store) func(ctx context.Context, name string) (bool, time.Time, error) {
	return func(ctx context.Context, name string) (bool, time.Time, error) {
		kv, err := st.GetKV(ctx, store.HeartbeatKey(name))
		if errors.Is(err, store.ErrNotFound) {
			return false, time.Time{}, nil
		}
		if err != nil {
			return false, time.Time{}, fmt.Errorf("join: heartbeat of %s: %w", name, err)
		}
		at, _ := time.Parse(time.RFC3339Nano, string(kv.Value)) // zero when unreadable: still alive
		return true, at, nil
	}
}

// replayed answers a request whose nonce was seen, by this endpoint (its
// memory, checked first) or by any endpoint sharing cfg.Nonces.
func (s *Server) replayed(ctx context.Context, w http.ResponseWriter, req Request, source string, now time.Time) bool {
	fresh := s.nonces.first(req.Nonce, now)
	if fresh && s.cfg.Nonces != nil {
		var err error
		if fresh, err = s.cfg.Nonces.First(ctx, req.Nonce, ReplayWindow); err != nil {
			s.internal(w, "record the request's nonce", err)
			return true
		}
	}
	if fresh {
		return false
	}
	s.log.Warn("join refused: replayed request", "token", req.TokenID, "node", req.Name, "source", source)
	problem(w, http.StatusConflict, CodeReplayed, "this request was already used (replay)")
	return true
}

// nameTaken answers a request for the name of a node that is alive: its
// certificate would let a second machine act as that node.
func (s *Server) nameTaken(ctx context.Context, w http.ResponseWriter, req Request, source string) bool {
	if s.cfg.NodeAlive == nil {
		return false
	}
	alive, at, err := s.cfg.NodeAlive(ctx, req.Name)
	if err != nil {
		s.internal(w, "read the node's heartbeat", err)
		return true
	}
	if !alive {
		return false
	}
	when := "unknown time"
	if !at.IsZero() {
		when = at.UTC().Format(time.RFC3339)
	}
	s.log.Warn("join refused: the node's name is in use", "token", req.TokenID, "node", req.Name, "heartbeat", when, "source", source)
	problem(w, http.StatusConflict, CodeNameInUse, fmt.Sprintf("node %s is alive (heartbeat at %s); a second machine cannot take its name; remove it first with nicoctl remove node %s or wait for its heartbeat to expire", req.Name, when, req.Name))
	return true
}
