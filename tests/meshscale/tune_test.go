package meshscale

import (
	"fmt"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/homystack/nico/pkg/gossip"
)

// timings is the gossip profile and memberlist tuning named by
// -nico.meshscale.tune: large (the lan profile tuned by tuneLarge), or one
// of the product's profiles as it ships (lan, wan).
func timings(name string) (gossip.Profile, func(*memberlist.Config), error) {
	switch name {
	case "large":
		return gossip.ProfileLAN, tuneLarge, nil
	case "lan":
		return gossip.ProfileLAN, nil, nil
	case "wan":
		return gossip.ProfileWAN, nil, nil
	}
	return "", nil, fmt.Errorf("-nico.meshscale.tune=%q: use large, lan or wan", name)
}

// tuneLarge is the tuning of tests/bench's BenchmarkGossipConvergence for
// large meshes packed onto few cores (its comment gives the reasons): the
// WAN probe timings (probe every 5 s, 3 s timeout, suspicion multiplier 6),
// gossip to 4 nodes every 500 ms, each message retransmitted
// 2*ceil(log10(n+1)) times, a full state sync every 10 s (memberlist scales
// it up with the mesh), no compression, and a handoff queue of 64.
func tuneLarge(c *memberlist.Config) {
	w := memberlist.DefaultWANConfig()
	c.ProbeInterval, c.ProbeTimeout = w.ProbeInterval, w.ProbeTimeout
	c.SuspicionMult = w.SuspicionMult
	c.GossipNodes = w.GossipNodes
	c.PushPullInterval = 10 * time.Second
	c.TCPTimeout = 10 * time.Second
	c.HandoffQueueDepth = 64
	c.EnableCompression = false
	c.GossipInterval = w.GossipInterval
	c.RetransmitMult = 2
}
