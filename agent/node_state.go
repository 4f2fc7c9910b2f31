package agent

import "sync/atomic"

// nodeState is what the agent knows of its node's own readiness, read by
// the watchdog's health check, the gossip publisher and the bring-up, and
// written by the member's start and stop, its supervisor and the join:
//
//	up       the node is brought up and serving (false while its member
//	         restarts, after its removal, and while the agent stops)
//	standby  a control-plane node waits to be added: ready, not a member
//	member   the local etcd member was started by this agent and has not
//	         been seen to exit
type nodeState struct {
	up, standby, member atomic.Bool
}

// ready: the node serves, or waits as a standby.
func (s *nodeState) ready() bool { return s.up.Load() || s.standby.Load() }

// setUp records whether the node serves.
func (s *nodeState) setUp(up bool) { s.up.Store(up) }

// isUp tells whether the node serves.
func (s *nodeState) isUp() bool { return s.up.Load() }

// setStandby records whether the node waits as a standby.
func (s *nodeState) setStandby(on bool) { s.standby.Store(on) }

// inStandby tells whether the node waits as a standby.
func (s *nodeState) inStandby() bool { return s.standby.Load() }

// memberStarted records the local member started by this agent.
func (s *nodeState) memberStarted() { s.member.Store(true) }

// memberGone records the local member stopped, or seen to exit, and
// reports whether it was running.
func (s *nodeState) memberGone() bool { return s.member.Swap(false) }

// memberRunning tells whether this agent runs the local member.
func (s *nodeState) memberRunning() bool { return s.member.Load() }

// memberCrashed records the local member seen to exit on its own: the
// node does not serve until it is started again.
func (s *nodeState) memberCrashed() {
	s.member.Store(false)
	s.up.Store(false)
}
