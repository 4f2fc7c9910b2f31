// Package coordinatortest holds what tests of a coordinator use.
package coordinatortest

import (
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/rollout"
	"github.com/homystack/nico/pkg/store"
)

// Observer is a coordinator.Observer that calls the function set for
// each event and ignores the others. Set its fields before the
// coordinator runs; a field's function may crash the leader (cut its
// connection, or panic in a test that drives the executor by hand), which
// is how the crash tests stop it at exactly that point.
type Observer struct {
	OnLeaderElected     func(fence store.Fence)
	OnMembershipStep    func(step membership.Step)
	OnMembershipChanged func(step membership.Step)
	OnMachineWrite      func(step string)
	OnRolloutStep       func(name string, step rollout.Step)
	OnDefrag            func(member string, start bool)
}

// LeaderElected calls OnLeaderElected.
func (o *Observer) LeaderElected(fence store.Fence) {
	if o.OnLeaderElected != nil {
		o.OnLeaderElected(fence)
	}
}

// MembershipStep calls OnMembershipStep.
func (o *Observer) MembershipStep(step membership.Step) {
	if o.OnMembershipStep != nil {
		o.OnMembershipStep(step)
	}
}

// MembershipChanged calls OnMembershipChanged.
func (o *Observer) MembershipChanged(step membership.Step) {
	if o.OnMembershipChanged != nil {
		o.OnMembershipChanged(step)
	}
}

// MachineWrite calls OnMachineWrite.
func (o *Observer) MachineWrite(step string) {
	if o.OnMachineWrite != nil {
		o.OnMachineWrite(step)
	}
}

// RolloutStep calls OnRolloutStep.
func (o *Observer) RolloutStep(name string, step rollout.Step) {
	if o.OnRolloutStep != nil {
		o.OnRolloutStep(name, step)
	}
}

// Defrag calls OnDefrag.
func (o *Observer) Defrag(member string, start bool) {
	if o.OnDefrag != nil {
		o.OnDefrag(member, start)
	}
}
