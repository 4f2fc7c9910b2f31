package gossip

import "sort"

// EtcdEndpoints returns the etcd client URLs that alive voters publish,
// sorted: what an agent with only a seed dials.
func EtcdEndpoints(nodes []NodeState) []string {
	var out []string
	for _, n := range nodes {
		if n.State == Alive && n.MetaErr == "" && n.Meta.Voter() {
			out = append(out, n.Meta.ClientURL)
		}
	}
	sort.Strings(out)
	return out
}
