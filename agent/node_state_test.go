package agent

import "testing"

// TestNodeState: the node is ready while it serves or waits as a standby;
// a crashed member takes it out of service; stopping a member reports
// whether one ran, once.
func TestNodeState(t *testing.T) {
	var s nodeState
	if s.ready() || s.isUp() || s.inStandby() || s.memberRunning() {
		t.Fatal("a new node state is not empty")
	}
	s.setStandby(true)
	if !s.ready() {
		t.Error("a standby is not ready")
	}
	s.setStandby(false)
	s.memberStarted()
	if s.ready() {
		t.Error("a node with a running member is ready before it is up")
	}
	s.setUp(true)
	if !s.ready() || !s.memberRunning() {
		t.Error("an up node with its member is not ready")
	}
	s.memberCrashed()
	if s.ready() || s.memberRunning() {
		t.Error("a node whose member crashed is still ready")
	}
	s.memberStarted()
	if !s.memberGone() || s.memberGone() {
		t.Error("memberGone reports the member's stop once")
	}
}
