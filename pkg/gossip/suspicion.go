package gossip

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Suspicion is visible to every member, not only to the one whose probe
// failed. memberlist gossips its suspect messages but tells its delegates
// nothing of them, and its Node.State is not kept up to date (v0.7.0), so
// the mesh gossips its own: the member whose probe failed (memberlist's
// log line "Suspect <name> has failed") records the peer suspect and
// broadcasts a user message naming it; every member receiving it records
// the peer suspect too. Memberlist's dead or alive verdict follows:
//
//	local probe fails --> suspect + broadcast "s<name>"
//	"s<name>" received --> suspect (only if alive, and not just refuted
//	                       here: hearsayGrace), and passed on once
//	suspect --> dead           memberlist's NotifyLeave
//	suspect --> alive          the peer answers a ping (probeSuspects), or
//	                           memberlist still lists it after its longest
//	                           suspicion timeout (it refuted: no event)
const msgSuspect byte = 's'

// suspectBroadcast is one "this peer is suspect" message; a newer one about
// the same peer replaces an older one in the queue.
type suspectBroadcast struct{ name string }

func (b suspectBroadcast) Invalidates(o memberlist.Broadcast) bool {
	ob, ok := o.(suspectBroadcast)
	return ok && ob.name == b.name
}
func (b suspectBroadcast) Name() string    { return "suspect/" + b.name }
func (b suspectBroadcast) Message() []byte { return append([]byte{msgSuspect}, b.name...) }
func (suspectBroadcast) Finished()         {}

// broadcasts is the mesh's queue of user messages. memberlist may call it
// with its node lock held, so the member count it needs is a cached number
// (refreshed on every poll), never a call into memberlist.
type broadcasts struct {
	members atomic.Int64
	q       *memberlist.TransmitLimitedQueue
}

func newBroadcasts(retransmitMult int) *broadcasts {
	b := &broadcasts{}
	b.members.Store(1)
	b.q = &memberlist.TransmitLimitedQueue{NumNodes: func() int { return int(b.members.Load()) }, RetransmitMult: retransmitMult}
	return b
}

// localSuspect records that this member's probe of name failed and tells
// the others.
func (m *Mesh) localSuspect(name string) {
	if name == m.cfg.Name {
		return
	}
	m.probeFailures.Add(1)
	m.tracker.suspect(name)
	m.bcast.q.QueueBroadcast(suspectBroadcast{name: name})
}

// receive handles a user message from another member.
func (m *Mesh) receive(msg []byte) {
	if len(msg) < 2 || msg[0] != msgSuspect {
		return // unknown kinds are from newer members: ignored
	}
	// Passed on when news here, as memberlist does with its own suspect
	// messages, so a member the first sender's few transmissions missed
	// hears it too. Not news when the peer answered this member's ping
	// a moment ago (hearsayGrace).
	if name := string(msg[1:]); name != m.cfg.Name && m.tracker.suspectHearsay(name, hearsayGrace(m.memberlistConfig())) {
		m.bcast.q.QueueBroadcast(suspectBroadcast{name: name})
	}
}

// hearsayGrace is how long after a suspect answered this member's ping a
// suspect message about it is taken as old news: two probe intervals plus
// twice the time a message is retransmitted (RetransmitMult gossip rounds
// per log10 of the member count, here taken as 1). The messages carry no
// incarnation, so without it a healed partition's suspicions echo: each
// member that pinged the peer alive records it suspect again from a copy
// still in flight, and passes that on as news (seen for seconds in a
// three-member fast mesh, healthy members flapping 20 times a second).
func hearsayGrace(c *memberlist.Config) time.Duration {
	return 2*c.ProbeInterval + 2*time.Duration(c.RetransmitMult)*c.GossipInterval
}

// maxSuspicion is the longest memberlist keeps a peer suspect in a mesh
// of n members before declaring it dead (its suspicion timeout times
// SuspicionMaxTimeoutMult), plus two probe intervals of slack.
func maxSuspicion(c *memberlist.Config, n int) time.Duration {
	scale := math.Max(1, math.Log10(math.Max(1, float64(n))))
	min := time.Duration(float64(c.SuspicionMult) * scale * float64(c.ProbeInterval))
	return time.Duration(c.SuspicionMaxTimeoutMult)*min + 2*c.ProbeInterval
}

// expireSuspects records alive the suspects memberlist still lists as
// members after the longest suspicion timeout: memberlist would have
// declared them dead by then unless they refuted the suspicion.
func (m *Mesh) expireSuspects(members []string) {
	suspects := m.tracker.inState(Suspect)
	if len(suspects) == 0 {
		return
	}
	c := m.memberlistConfig()
	limit := maxSuspicion(c, len(members))
	listed := map[string]bool{}
	for _, n := range members {
		listed[n] = true
	}
	now := m.cfg.Now()
	for _, s := range suspects {
		if listed[s.Name] && now.Sub(s.Since) > limit {
			m.tracker.refuted(s.Name)
		}
	}
}

// ProbeFailures counts this member's probes of a peer that failed (each
// made the peer suspect), since the mesh was made.
func (m *Mesh) ProbeFailures() uint64 { return m.probeFailures.Load() }
