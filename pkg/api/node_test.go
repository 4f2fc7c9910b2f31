package api

import (
	"slices"
	"testing"
)

func TestGossipPeers(t *testing.T) {
	node := func(name, addr string, phase NodePhase) *Node {
		n := NewNode(name)
		n.Status.GossipAddr, n.Status.Phase = addr, phase
		return n
	}
	nodes := []*Node{
		node("me", "10.0.0.1:7946", NodeMember),
		node("b", "10.0.0.3:7946", NodeMember),
		node("a", "10.0.0.2:7946", NodeRegistered),
		node("gone", "10.0.0.9:7946", NodeRemoved),
		node("old", "", NodeMember), // an agent without gossip
		node("twin", "10.0.0.2:7946", NodeJoining),
	}
	got := GossipPeers(nodes, "me")
	if want := []string{"10.0.0.2:7946", "10.0.0.3:7946"}; !slices.Equal(got, want) {
		t.Fatalf("GossipPeers = %v, want %v (not itself, not removed nodes, no empty or repeated address)", got, want)
	}
}

func TestShownMember(t *testing.T) {
	for _, tc := range []struct {
		phase     NodePhase
		wantID    MemberID
		wantState string
	}{
		{NodeMember, 0xabc, "voter"},
		{NodeJoining, 0xabc, "voter"},
		{NodeStandby, 0, "standby"},
		{NodeRemoved, 0, "removed"},
	} {
		s := NodeStatus{Phase: tc.phase, MemberID: 0xabc, MemberState: MemberVoter}
		if id, state := s.ShownMember(); id != tc.wantID || state != tc.wantState {
			t.Errorf("%s: ShownMember() = %s %q, want %s %q", tc.phase, id, state, tc.wantID, tc.wantState)
		}
	}
}
