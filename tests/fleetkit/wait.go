package fleetkit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// probeBudget bounds one probe of a wait that asks again until its own
// deadline: a member list and a status call to every member, each status
// on a connection of its own whose TLS handshake a loaded machine slows.
// Shorter, no probe finishes there and the wait fails while etcd serves.
const probeBudget = 10 * time.Second

// Members returns the member list: name -> learner (an unstarted member
// is "unstarted-<id>").
func Members(ctx context.Context, cli *clientv3.Client) (map[string]bool, error) {
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, m := range resp.Members {
		name := m.Name
		if name == "" {
			name = fmt.Sprintf("unstarted-%x", m.ID)
		}
		out[name] = m.IsLearner
	}
	return out, nil
}

// UnhealthyMembers names the members whose Status call fails.
func UnhealthyMembers(ctx context.Context, cli *clientv3.Client) []string {
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return []string{err.Error()}
	}
	var sick []string
	for _, m := range resp.Members {
		if len(m.ClientURLs) == 0 {
			sick = append(sick, m.Name+" (no client URL)")
			continue
		}
		if _, err := cli.Status(ctx, m.ClientURLs[0]); err != nil {
			sick = append(sick, m.Name)
		}
	}
	return sick
}

// WaitSettled waits through cli until the voters satisfy want (given
// sorted), no learner is left, no operation is in flight and every member
// answers (so that the next step's quorum check, which refuses a change
// while one is unhealthy, sees them all); it returns the voters, sorted.
func WaitSettled(tb testing.TB, cli *clientv3.Client, within time.Duration, what string, want func(voters []string) bool) []string {
	tb.Helper()
	return waitSettled(tb, cli, within, what, want, func() string { return "" })
}

// waitSettled is WaitSettled whose failure message ends with note().
func waitSettled(tb testing.TB, cli *clientv3.Client, within time.Duration, what string, want func(voters []string) bool, note func() string) []string {
	tb.Helper()
	var voters []string
	testwait.For(tb, within, what, func() (bool, string) {
		ok, why := settled(cli, want, &voters)
		return ok, why + note()
	})
	return slices.Clone(voters)
}

// settled is one look of WaitSettled: the voters found go to *voters.
func settled(cli *clientv3.Client, want func(voters []string) bool, voters *[]string) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdtest.CallBudget)
	defer cancel()
	ms, err := Members(ctx, cli)
	if err != nil {
		return false, err.Error()
	}
	*voters = (*voters)[:0]
	for n, learner := range ms {
		if !learner {
			*voters = append(*voters, n)
		}
	}
	slices.Sort(*voters)
	if len(*voters) != len(ms) || !want(*voters) {
		return false, fmt.Sprint(ms)
	}
	active, err := cli.Get(ctx, store.DefaultPrefix+store.ActiveOpKey)
	if err != nil || len(active.Kvs) > 0 {
		return false, fmt.Sprintf("members %v, an operation is still active", ms)
	}
	if sick := UnhealthyMembers(ctx, cli); len(sick) > 0 {
		return false, fmt.Sprintf("members %v, not answering: %v", ms, sick)
	}
	return true, ""
}

// WaitVotersThrough waits through cli until exactly the named members are
// voters, settled (WaitSettled).
func WaitVotersThrough(tb testing.TB, cli *clientv3.Client, within time.Duration, names ...string) {
	tb.Helper()
	want := slices.Clone(names)
	slices.Sort(want)
	WaitSettled(tb, cli, within, "voters "+strings.Join(want, ","), func(v []string) bool { return slices.Equal(v, want) })
}

// WaitVoters waits until exactly the named members are voters, settled.
func (f *Fleet) WaitVoters(within time.Duration, names ...string) {
	f.TB.Helper()
	want := slices.Clone(names)
	slices.Sort(want)
	waitSettled(f.TB, f.Client(), within, "voters "+strings.Join(want, ","), func(v []string) bool { return slices.Equal(v, want) }, f.exitedNote)
}

// WaitVoterCount waits until the cluster has exactly n voters, settled,
// and returns their names, sorted.
func (f *Fleet) WaitVoterCount(within time.Duration, n int) []string {
	f.TB.Helper()
	return waitSettled(f.TB, f.Client(), within, fmt.Sprintf("%d voters", n), func(v []string) bool { return len(v) == n }, f.exitedNote)
}

// exitedNote names the fleet's agents whose Run has returned, with what
// it returned, for a wait's failure message ("" when none has).
func (f *Fleet) exitedNote() string {
	f.mu.Lock()
	nodes := make([]*Node, 0, len(f.nodes))
	for _, n := range f.nodes {
		nodes = append(nodes, n)
	}
	f.mu.Unlock()
	var out []string
	for _, n := range nodes {
		select {
		case err := <-n.Done:
			n.Done <- err
			out = append(out, fmt.Sprintf("%s: %v", n.Name, err))
		default:
		}
	}
	if len(out) == 0 {
		return ""
	}
	slices.Sort(out)
	return "; agents exited: " + strings.Join(out, "; ")
}

// LeaderName is the coordinator leader's candidate name, "" when none.
func (f *Fleet) LeaderName() string {
	ctx, cancel := context.WithTimeout(context.Background(), etcdtest.CallBudget)
	defer cancel()
	name, _ := coordinator.Leader(ctx, f.Store())
	return name
}

// WaitLeader waits until a candidate leads and returns its name.
func (f *Fleet) WaitLeader(within time.Duration) string {
	f.TB.Helper()
	st := f.Store()
	var name string
	testwait.For(f.TB, within, "a coordinator leader", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), probeBudget)
		defer cancel()
		name, _ = coordinator.Leader(ctx, st)
		return name != "", "no leader"
	})
	return name
}

// EtcdLeader returns the node name of the etcd leader.
func (f *Fleet) EtcdLeader() string {
	f.TB.Helper()
	cli := f.Client()
	var name string
	testwait.For(f.TB, time.Minute, "etcd leader", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), probeBudget)
		defer cancel()
		ms, err := cli.MemberList(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range ms.Members {
			if len(m.ClientURLs) == 0 {
				continue
			}
			st, err := cli.Status(ctx, m.ClientURLs[0])
			if err == nil && st.Leader == m.ID {
				name = m.Name
				return true, ""
			}
		}
		return false, "no member says it leads"
	})
	return name
}

// CheckVoter fails unless the member at peer is a voter.
func (f *Fleet) CheckVoter(peer string) error {
	cli := f.Client()
	// Closed now, not when the test ends: an agent that gets ready during
	// the fleet's teardown would otherwise hold a connection to its member
	// open while the member stops, until every member has stopped.
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), etcdtest.CallBudget)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return err
	}
	for _, m := range resp.Members {
		if slices.Contains(m.PeerURLs, peer) && !m.IsLearner {
			return nil
		}
	}
	return fmt.Errorf("READY sent while the member at %s is not a voter", peer)
}

// CheckVoterOrStandby fails unless the member at peer is a voter or the
// node's join request is marked Standby (the cluster has its voters).
func (f *Fleet) CheckVoterOrStandby(name, peer string) error {
	err := f.CheckVoter(peer)
	if err == nil {
		return nil
	}
	cli := f.Client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), etcdtest.CallBudget)
	defer cancel()
	resp, gerr := cli.Get(ctx, store.DefaultPrefix+store.JoinKey(name))
	if gerr != nil || len(resp.Kvs) == 0 {
		return err
	}
	j := &api.JoinRequest{}
	if derr := store.Decode(resp.Kvs[0], j); derr == nil && j.Status.Phase == api.JoinPending && j.Status.Standby {
		return nil
	}
	return err
}

// SetVoters writes spec.voters into the fleet's EtcdCluster through st,
// creating it when absent (a coordinator then plans with it from its
// first pass instead of writing its bootstrap default of three).
func SetVoters(tb testing.TB, st *store.Store, n int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ec := api.NewEtcdCluster()
	if err := st.Get(ctx, store.EtcdClusterKey, ec); err != nil && !errors.Is(err, store.ErrNotFound) {
		tb.Fatal(err)
	}
	ec.Spec.Voters = n
	if err := st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		tb.Fatal(err)
	}
}

// SetVoters is SetVoters through the fleet's store.
func (f *Fleet) SetVoters(n int) {
	f.TB.Helper()
	SetVoters(f.TB, f.Store(), n)
}

// WaitObj waits on a watch of the object at key until cond holds, and
// returns the object.
func WaitObj[T any, PT interface {
	*T
	api.Object
}](f *Fleet, within time.Duration, key string, what string, cond func(PT) bool) PT {
	f.TB.Helper()
	st := f.Store()
	var got PT
	testwait.Key(f.TB, st.Client(), key, within, what, func(kv *mvccpb.KeyValue) (bool, string) {
		if kv == nil {
			return false, key + " absent"
		}
		obj := PT(new(T))
		if err := store.Decode(kv, obj); err != nil {
			return false, err.Error()
		}
		got = obj
		return cond(obj), fmt.Sprintf("%+v", obj)
	})
	return got
}

// Grow bootstraps names[0], waits until it is a voter, starts the
// candidate coord, starts the other names at once and waits until all are
// voters, settled; it returns the nodes in the order of names.
func (f *Fleet) Grow(coord string, names ...string) []*Node {
	f.TB.Helper()
	nodes := []*Node{f.Start(f.AgentConfig(names[0], true))}
	f.WaitVoters(30*time.Second, names[0])
	f.StartCoordinator(coord)
	for _, name := range names[1:] {
		nodes = append(nodes, f.Start(f.AgentConfig(name, false)))
	}
	within := f.GrowWithin
	if within == 0 {
		within = GrowBound
	}
	f.WaitVoters(within, names...)
	return nodes
}
