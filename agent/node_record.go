package agent

import (
	"sync"

	"github.com/homystack/nico/pkg/api"
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
