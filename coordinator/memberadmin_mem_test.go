package coordinator

import (
	"context"
	"fmt"
	"sync"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/membership"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// memAdmin is MemberAdmin's in-memory fake: an etcd membership that
// changes at once, answers with etcd's own errors where etcd would refuse,
// and counts the changes it made. A learner is unstarted (no name, no
// client URL, unhealthy) until start; there is one learner at a time, as
// etcd's default --max-learners allows.
type memAdmin struct {
	mu      sync.Mutex
	nextID  uint64
	members []*memMember
	leader  api.MemberID
	index   uint64 // raft index of every started member: one per change
	changes map[string]int
}

type memMember struct {
	id             api.MemberID
	name           string
	peer, client   string
	learner, alive bool
}

// newMemAdmin returns a cluster of started voters named after names, with
// peer and client URLs https://<name>:2380 and :2379; the first leads.
func newMemAdmin(names ...string) *memAdmin {
	f := &memAdmin{nextID: 0x1000, index: 1, changes: map[string]int{}}
	for _, n := range names {
		m := f.add(n, memPeerURL(n), false)
		m.name, m.client, m.alive = n, memClientURL(n), true
	}
	if len(f.members) > 0 {
		f.leader = f.members[0].id
	}
	return f
}

func memPeerURL(name string) string   { return "https://" + name + ":2380" }
func memClientURL(name string) string { return "https://" + name + ":2379" }

func (f *memAdmin) add(name, peer string, learner bool) *memMember {
	f.nextID++
	m := &memMember{id: api.MemberID(f.nextID), peer: peer, learner: learner}
	f.members = append(f.members, m)
	f.index++
	return m
}

func (f *memAdmin) byID(id api.MemberID) *memMember {
	for _, m := range f.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

// start starts member id as name, serving at client: what the joining
// node's agent does with the initial cluster it was given.
func (f *memAdmin) start(id api.MemberID, name, client string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.byID(id)
	if m == nil {
		return fmt.Errorf("memadmin: start %s: %w", id, rpctypes.ErrMemberNotFound)
	}
	m.name, m.client, m.alive = name, client, true
	f.index++
	return nil
}

// changed counts the membership changes of one kind: "add", "promote",
// "remove", "move".
func (f *memAdmin) changed(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changes[kind]
}

// Observe implements MemberAdmin.
func (f *memAdmin) Observe(ctx context.Context) ([]membership.Member, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memadmin: member list: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]membership.Member, 0, len(f.members))
	for _, m := range f.members {
		o := membership.Member{ID: m.id, Name: m.name, PeerURLs: []string{m.peer}, Learner: m.learner, Healthy: m.alive, Leader: m.id == f.leader}
		if m.alive {
			o.ClientURLs = []string{m.client}
			o.RaftIndex = f.index
		}
		out = append(out, o)
	}
	return out, nil
}

func (f *memAdmin) snapshot() []membership.Member {
	ms := make([]membership.Member, 0, len(f.members))
	for _, m := range f.members {
		ms = append(ms, membership.Member{ID: m.id, Name: m.name, PeerURLs: []string{m.peer}})
	}
	return ms
}

// AddLearner implements MemberAdmin.
func (f *memAdmin) AddLearner(ctx context.Context, name, peerURL string) (api.MemberID, string, error) {
	if err := ctx.Err(); err != nil {
		return 0, "", fmt.Errorf("memadmin: add learner %s: %w", peerURL, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// In etcd's order: the learner slot before the peer URL.
	for _, m := range f.members {
		if m.learner {
			return 0, "", fmt.Errorf("memadmin: add learner %s: %w", peerURL, rpctypes.ErrTooManyLearners)
		}
	}
	for _, m := range f.members {
		if m.peer == peerURL {
			return 0, "", fmt.Errorf("memadmin: add learner %s: %w", peerURL, rpctypes.ErrPeerURLExist)
		}
	}
	m := f.add("", peerURL, true)
	f.changes["add"]++
	return m.id, membership.InitialCluster(f.snapshot(), m.id, name), nil
}

// Promote implements MemberAdmin.
func (f *memAdmin) Promote(ctx context.Context, voters []string, id api.MemberID, learnerURL, leaderURL string, progress func(uint64)) error {
	if len(voters) == 0 {
		return fmt.Errorf("memadmin: promote %s: no healthy voter to ask", id)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memadmin: promote %s: %w", id, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.byID(id)
	switch {
	case m == nil:
		return fmt.Errorf("memadmin: promote %s: %w", id, rpctypes.ErrMemberNotFound)
	case !m.learner:
		return fmt.Errorf("memadmin: promote %s: %w", id, rpctypes.ErrMemberNotLearner)
	case !m.alive || learnerURL == "" || learnerURL != m.client:
		// etcdadmin asks the learner's own status first.
		return fmt.Errorf("memadmin: promote %s at %q: %w", id, learnerURL, etcdadmin.ErrNotServing)
	}
	if progress != nil && learnerURL != "" && leaderURL != "" {
		progress(f.index)
	}
	m.learner = false
	f.index++
	f.changes["promote"]++
	return nil
}

// Remove implements MemberAdmin.
func (f *memAdmin) Remove(ctx context.Context, id api.MemberID) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memadmin: remove %s: %w", id, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, m := range f.members {
		if m.id != id {
			continue
		}
		f.members = append(f.members[:i], f.members[i+1:]...)
		f.index++
		f.changes["remove"]++
		if f.leader == id {
			f.leader = 0
			for _, o := range f.members {
				if !o.learner && o.alive {
					f.leader = o.id
					break
				}
			}
		}
		return nil
	}
	return nil
}

// MoveLeader implements MemberAdmin.
func (f *memAdmin) MoveLeader(ctx context.Context, leaderURL string, to api.MemberID) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memadmin: move leader to %s: %w", to, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var at *memMember
	for _, m := range f.members {
		if m.alive && m.client == leaderURL {
			at = m
		}
	}
	if at == nil || at.id != f.leader {
		return fmt.Errorf("memadmin: move leader to %s: %w", to, rpctypes.ErrNotLeader)
	}
	t := f.byID(to)
	if t == nil || t.learner || !t.alive {
		return fmt.Errorf("memadmin: move leader to %s: %w", to, rpctypes.ErrBadLeaderTransferee)
	}
	f.leader = to
	f.index++
	f.changes["move"]++
	return nil
}
