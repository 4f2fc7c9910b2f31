package fleetkit

import (
	"time"

	"github.com/hashicorp/memberlist"
)

// TuneLargeMesh is the lan profile with the probe timings memberlist's WAN
// config uses for loaded networks (probe every 5 s, 3 s timeout, suspicion
// multiplier 6: a busy process no longer suspects its peers), gossip to 4
// nodes rather than 3, and a full state sync every 10 s. The last matters
// for the tail: a member that joined after another's alive message had
// been retransmitted its 4*ceil(log10(n+1)) times, through a seed that did
// not know it yet, learns of it only by push-pull, whose interval memberlist
// scales up with the mesh (x(log2(n)-4): 30 s becomes ~80 s at 100 members,
// ~150 s at 500). With 60 s (the WAN value) 100 members reached 99.99% alive
// in 5 s and not 100% in 3 min.
func TuneLargeMesh(c *memberlist.Config) {
	w := memberlist.DefaultWANConfig()
	c.ProbeInterval, c.ProbeTimeout = w.ProbeInterval, w.ProbeTimeout
	c.SuspicionMult = w.SuspicionMult
	c.GossipNodes = w.GossipNodes
	c.PushPullInterval = 10 * time.Second
	c.TCPTimeout = 10 * time.Second
	// Each queued UDP message pins the 64 KiB buffer memberlist read it
	// into; 1024 of them per member, 500 members, is gigabytes of heap the
	// collector has to mark on 2 busy cores. A busy member drops instead.
	c.HandoffQueueDepth = 64
	// LZW costs a 16 KiB table per compressed packet: a quarter of the CPU
	// and nearly half of the allocations of a 500-member run.
	c.EnableCompression = false
	// Gossip every 500 ms (the WAN value) rather than 200: a quarter of
	// the CPU went to memberlist's gossip rounds, mostly picking
	// broadcasts from its queues.
	c.GossipInterval = w.GossipInterval
	// Each message is sent 2*ceil(log10(n+1)) times rather than 4x: at
	// 500 members every suspicion (memberlist's, nico's and the refuting
	// alive) was retransmitted 12 times by each of the 500.
	c.RetransmitMult = 2
}
