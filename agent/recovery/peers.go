package recovery

import (
	"net"
	"slices"

	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/restore"
)

// MeshPeers are the control-plane members of a gossip mesh (alive or not:
// a lost host is listed, and then does not answer) at the recovery address
// addr gives each; a member addr has none for is left out.
func MeshPeers(nodes []gossip.NodeState, addr func(gossip.NodeState) (string, bool)) []restore.AgentPeer {
	var out []restore.AgentPeer
	for _, n := range nodes {
		if !slices.Contains(n.Meta.Roles, "controlPlane") {
			continue
		}
		if a, ok := addr(n); ok {
			out = append(out, restore.AgentPeer{Node: n.Name, Addr: a})
		}
	}
	return out
}

// SamePort gives each member the host of its gossip address at port: one
// recovery.listen for the fleet.
func SamePort(port string) func(gossip.NodeState) (string, bool) {
	return func(n gossip.NodeState) (string, bool) {
		host, _, err := net.SplitHostPort(n.Addr)
		if err != nil || port == "" {
			return "", false
		}
		return net.JoinHostPort(host, port), true
	}
}
