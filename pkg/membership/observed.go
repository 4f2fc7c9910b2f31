package membership

import (
	"sort"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// Member is one etcd member as the coordinator observed it.
type Member struct {
	ID         api.MemberID
	Name       string // empty until the member has started and published
	PeerURLs   []string
	ClientURLs []string
	Learner    bool
	// Healthy: its status answered within the health timeout, no alarms.
	Healthy bool
	// NoSpace: its status reported etcd's NOSPACE alarm (raised on any
	// member, it refuses every write of the cluster).
	NoSpace bool
	Leader  bool
	// RaftIndex is the member's raft index from its status (0: unknown).
	RaftIndex uint64
	// Node is the registered node whose peer URL the member has ("": a ghost).
	Node string
	// External is the name of the external member (EtcdCluster
	// spec.members, or one nico on-boarded) whose peer URL it has: nico
	// does not run it, and judges it by its etcd health alone. A member
	// with no Node but an External is not a ghost.
	External string
	// Version is the etcd server version from its status ("": unknown),
	// StorageVersion the version of its data's schema ("3.6.0").
	Version, StorageVersion string
}

// Started tells whether the member has started (published its name or answered).
func (m Member) Started() bool { return m.Name != "" || m.Healthy }

func (m Member) label() string {
	if m.Node != "" {
		return m.Node
	}
	if m.External != "" {
		return m.External
	}
	if m.Name != "" {
		return m.Name
	}
	return m.ID.String()
}

// Observed is everything the planner looks at.
type Observed struct {
	Members  []Member
	Nodes    []*api.Node
	Alive    map[string]bool // node name -> its heartbeat lease is live
	Joins    []*api.JoinRequest
	Removals []*api.RemoveRequest
	// Active is the operation in flight, nil when none is.
	Active *api.Operation
	// Liveness is each node's gossip and lease liveness (see
	// CombineLiveness); nodes not in it are taken as alive.
	Liveness map[string]Liveness
	// Cluster is the declared EtcdCluster's spec: voters, external
	// members, version (its policy comes to Plan as a Policy).
	Cluster api.EtcdClusterSpec
	// Onboarded are the external members nico added, by name, each with
	// the peer URL it was added at (store.ExternalMembersDir): one that
	// left the spec is removed while still a member.
	Onboarded map[string]string
	// Claimed are the nodes whose machines the cluster asked a machine
	// pool for (its MachineClaim): a shrink sheds them before hosts that
	// came on their own, so that their VMs can be taken away.
	Claimed map[string]bool
}

// Policy holds the planner's tunables.
type Policy struct {
	// LearnerStartTimeout bounds the time from adding a learner until it starts.
	LearnerStartTimeout time.Duration
	// LearnerProgressTimeout bounds the time a started learner may go
	// without its raft index growing before it is promoted.
	LearnerProgressTimeout time.Duration
	// ReplaceDeadMembersAfter files the removal of a voter whose node has
	// been dead this long, if quorum allows; 0 never does.
	ReplaceDeadMembersAfter time.Duration
}

// DefaultPolicy is used when nothing is configured.
var DefaultPolicy = Policy{LearnerStartTimeout: 2 * time.Minute, LearnerProgressTimeout: 2 * time.Minute}

func (o Observed) node(name string) *api.Node {
	for _, n := range o.Nodes {
		if n.Metadata.Name == name {
			return n
		}
	}
	return nil
}

func (o Observed) memberByPeer(peer string) *Member {
	if peer == "" {
		return nil
	}
	for i := range o.Members {
		for _, u := range o.Members[i].PeerURLs {
			if u == peer {
				return &o.Members[i]
			}
		}
	}
	return nil
}

func (o Observed) memberByID(id api.MemberID) *Member {
	for i := range o.Members {
		if o.Members[i].ID == id {
			return &o.Members[i]
		}
	}
	return nil
}

// memberOfNode finds the member of a node by its peer URL, else by name.
func (o Observed) memberOfNode(name string) *Member {
	if n := o.node(name); n != nil {
		if m := o.memberByPeer(n.Spec.PeerURL); m != nil {
			return m
		}
	}
	for i := range o.Members {
		if o.Members[i].Node == name || (o.Members[i].Node == "" && o.Members[i].External == "" && o.Members[i].Name == name) {
			return &o.Members[i]
		}
	}
	return nil
}

func (o Observed) leader() *Member {
	for i := range o.Members {
		if o.Members[i].Leader {
			return &o.Members[i]
		}
	}
	return nil
}

func (o Observed) learners() []Member {
	var out []Member
	for _, m := range o.Members {
		if m.Learner {
			out = append(out, m)
		}
	}
	return out
}

// healthyVoterURLs are the client URLs of healthy voters, leader first.
func (o Observed) healthyVoterURLs() []string {
	var out []string
	for _, m := range o.Members {
		if !m.Learner && m.Healthy && len(m.ClientURLs) > 0 {
			if m.Leader {
				out = append(m.ClientURLs[:1:1], out...)
			} else {
				out = append(out, m.ClientURLs[0])
			}
		}
	}
	return out
}

func (o Observed) removalPending(node string) bool {
	for _, r := range o.Removals {
		if r.Spec.Node == node && !r.Status.Phase.Finished() {
			return true
		}
	}
	return false
}

// InitialCluster renders the --initial-cluster value for learner id, to be
// started under name: every started member plus the learner. Members that
// have not started have no name yet and are left out (etcd needs a name per
// peer URL, and learns of them from the cluster anyway).
func InitialCluster(members []Member, id api.MemberID, name string) string {
	var parts []string
	for _, m := range members {
		n := m.Name
		if m.ID == id {
			n = name
		}
		if n == "" {
			continue
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, n+"="+u)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// MatchNodes sets each member's Node to the registered node whose peer URL
// it has; members no node claims stay ghosts ("").
func MatchNodes(members []Member, nodes []*api.Node) {
	byPeer := map[string]string{}
	for _, n := range nodes {
		if n.Spec.PeerURL != "" {
			byPeer[n.Spec.PeerURL] = n.Metadata.Name
		}
	}
	for i := range members {
		for _, u := range members[i].PeerURLs {
			if n, ok := byPeer[u]; ok {
				members[i].Node = n
			}
		}
	}
}
