package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// nodeRecord is the node's object as the agent last registered or wrote
// it (none before registration), and its heartbeat's lease (0: none
// granted yet). The heartbeat sets the lease while controllers change the
// status, so both are read and changed only through these methods, under
// one lock; the store writes happen outside it, on a copy.
type nodeRecord struct {
	mu    sync.Mutex
	node  *api.Node
	lease int64
}

// adopt keeps n, just written, as the node's object. A lease the
// heartbeat granted meanwhile goes into its status, written with the next
// status change.
func (r *nodeRecord) adopt(n *api.Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.node = n
	if r.lease != 0 {
		n.Status.Lease = r.lease
	}
}

// view is a copy of the node's object; false before registration.
func (r *nodeRecord) view() (api.Node, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.node == nil {
		return api.Node{}, false
	}
	return *r.node, true
}

// update changes the node's status with change and returns a copy of the
// object after it; false, and change not run, before registration.
// change runs under the lock: it must not block.
func (r *nodeRecord) update(change func(*api.NodeStatus)) (api.Node, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.node == nil {
		return api.Node{}, false
	}
	change(&r.node.Status)
	return *r.node, true
}

// setLease records the heartbeat's lease, in the status too once the node
// is registered.
func (r *nodeRecord) setLease(lease int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lease = lease
	if r.node != nil {
		r.node.Status.Lease = lease
	}
}

// heartbeatLease is the heartbeat's lease; 0 before one is granted.
func (r *nodeRecord) heartbeatLease() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lease
}

// nodeWriter writes this node's object: its registration (with the
// heartbeat's key when a lease is granted) and every change of its phase,
// kept in the node record (nodeRecord) the heartbeat shares.
type nodeWriter struct {
	cfg    *Config
	rec    *nodeRecord
	state  *nodeState
	member *localMember // the running member's ID, role and version
	store  func() *store.Store
	now    func() time.Time
	log    *slog.Logger
}

// register writes the node object, keeping its creation time.
func (w *nodeWriter) register(ctx context.Context) error {
	old := &api.Node{}
	if err := w.store().Get(ctx, store.NodeKey(w.cfg.Name), old); errors.Is(err, store.ErrNotFound) {
		old = nil
	} else if err != nil {
		return fmt.Errorf("agent: register: %w", err)
	}
	n := w.object(old)
	if err := w.store().Put(ctx, store.NodeKey(w.cfg.Name), n); err != nil {
		return fmt.Errorf("agent: register: %w", err)
	}
	w.registered(n)
	return nil
}

// object is this node's object to register, keeping old's creation
// time and status (old nil: a new node).
func (w *nodeWriter) object(old *api.Node) *api.Node {
	n := api.NewNode(w.cfg.Name)
	if old != nil {
		n.Metadata.CreatedAt = old.Metadata.CreatedAt
		n.Status = old.Status
	} else {
		n.Metadata.CreatedAt = w.now()
	}
	n.Spec = api.NodeSpec{Roles: w.cfg.Roles, Bootstrap: w.cfg.Bootstrap, Labels: w.cfg.Labels}
	if w.cfg.controlPlane() {
		n.Spec.PeerURL, n.Spec.ClientURL = w.cfg.PeerURL, w.cfg.ClientURL
	}
	n.Status.AgentVersion = w.cfg.Version
	n.Status.EtcdVersion = w.member.runningVersion()
	n.Status.Certificate = nodeCertPEM(w.cfg)
	n.Status.GossipAddr = gossipAddr(w.cfg)
	n.Status.Phase = api.NodeRegistered
	if w.cfg.controlPlane() && !w.state.memberRunning() {
		n.Status.Phase, n.Status.Message = api.NodeJoining, msgWaitLearner
	}
	n.Status.UpdatedAt = w.now()
	return n
}

// registered keeps n, written, as the node's object.
func (w *nodeWriter) registered(n *api.Node) {
	w.rec.adopt(n)
	w.log.Info("registered", "roles", w.cfg.Roles)
}

// heartbeatOps writes the heartbeat key on the lease firstLease granted:
// none when there is none.
func (w *nodeWriter) heartbeatOps() []clientv3.Op {
	lease := clientv3.LeaseID(w.rec.heartbeatLease())
	if lease == 0 {
		return nil
	}
	return []clientv3.Op{store.HeartbeatOp(w.cfg.Name, w.now(), lease)}
}

// setPhase records the node's phase and member state; errors are logged,
// since status is advisory and rewritten on the next change.
func (w *nodeWriter) setPhase(ctx context.Context, phase api.NodePhase, msg string) {
	if err := w.writePhase(ctx, phase, msg); err != nil && ctx.Err() == nil {
		w.log.Warn("status not written", "err", err)
	}
}

// setPhaseIfChanged is setPhase unless the node already shows phase and
// msg (register wrote them): one write less on the way to a join.
func (w *nodeWriter) setPhaseIfChanged(ctx context.Context, phase api.NodePhase, msg string) {
	n, ok := w.rec.view()
	if !ok || n.Status.Phase != phase || n.Status.Message != msg {
		w.setPhase(ctx, phase, msg)
	}
}

// writePhase records the node's phase and member state.
func (w *nodeWriter) writePhase(ctx context.Context, phase api.NodePhase, msg string) error {
	if _, registered := w.rec.view(); !registered {
		return nil
	}
	cert := nodeCertPEM(w.cfg)
	var setMember func(*api.NodeStatus)
	if w.cfg.controlPlane() && w.state.memberRunning() {
		if id, cid, learner, err := w.member.self(ctx); err == nil {
			setMember = func(s *api.NodeStatus) {
				s.MemberID, s.ClusterID = id, cid
				s.MemberState = api.MemberVoter
				if learner {
					s.MemberState = api.MemberLearner
				}
			}
		}
	}
	// Changed and copied under the record's lock, written outside it: the
	// heartbeat sets the lease meanwhile and must not wait for etcd here.
	now, etcdVersion := w.now(), w.member.runningVersion()
	node, ok := w.rec.update(func(s *api.NodeStatus) {
		s.Phase, s.Message, s.UpdatedAt, s.EtcdVersion = phase, msg, now, etcdVersion
		if cert != "" {
			s.Certificate = cert
		}
		if setMember != nil {
			setMember(s)
		}
		if phase.HasNoMember() {
			// A standby or removed node runs no member: its record must
			// not keep the ID and role of the member it was.
			s.MemberID, s.MemberState = 0, api.MemberNone
		}
	})
	if !ok {
		return nil
	}
	if err := w.store().Put(ctx, store.NodeKey(w.cfg.Name), &node); err != nil {
		return fmt.Errorf("agent: write node status %s: %w", phase, err)
	}
	return nil
}
