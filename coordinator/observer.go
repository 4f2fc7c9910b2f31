package coordinator

import (
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/rollout"
	"github.com/homystack/nico/pkg/store"
)

// Observer is told of the leader's decisions as it makes them: what a
// trace, an audit log or a test follows (Config.Observer; nil observes
// nothing). Its methods are called on the deciding controller's
// goroutine, in the middle of the decision, and must return quickly; the
// decision goes on when they return. coordinatortest.Observer records
// them for tests. Metrics (Coordinator.Metrics) are recorded apart: they
// count every pass, a failed or an idle one included, where an Observer
// hears only of the decisions.
//
// MembershipChanged and MachineWrite mark the points where a leader that
// dies leaves work half done: etcd changed, or machines asked for, and the
// next write not made yet. The crash tests cut the leader there and prove
// its successor resumes from what was written (tests/integration
// failover_test.go, etcdmachines_crash_test.go).
type Observer interface {
	// LeaderElected: this candidate won the election; every write of
	// the term is fenced on fence.
	LeaderElected(fence store.Fence)
	// MembershipStep: the leader applies step (never membership.None).
	MembershipStep(step membership.Step)
	// MembershipChanged: etcd accepted step's change of the membership
	// (a learner added or promoted, the leadership moved, a member
	// removed), and the journal does not record it yet.
	MembershipChanged(step membership.Step)
	// MachineWrite: the leader wrote a step of asking a pool for
	// machines: "claim" (the etcd-machines controller wrote the
	// EtcdCluster's claim) or "machines" (the machine-pool controller
	// created Machines).
	MachineWrite(step string)
	// RolloutStep: the leader applies step of rollout name (never
	// rollout.None or rollout.Wait).
	RolloutStep(name string, step rollout.Step)
	// Defrag: the leader starts (start true) or ends the
	// defragmentation of member (coordinator/etcddefrag.go).
	Defrag(member string, start bool)
}

// nopObserver observes nothing: a nil Config.Observer.
type nopObserver struct{}

func (nopObserver) LeaderElected(store.Fence)         {}
func (nopObserver) MembershipStep(membership.Step)    {}
func (nopObserver) MembershipChanged(membership.Step) {}
func (nopObserver) MachineWrite(string)               {}
func (nopObserver) RolloutStep(string, rollout.Step)  {}
func (nopObserver) Defrag(string, bool)               {}
