package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/linearkv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// scenario is one run: a cluster, its clients' workload and the invariant
// watcher; finish checks everything and records a summary row.
type scenario struct {
	t       *testing.T
	name    string
	c       *cluster
	cli     *clientv3.Client
	st      *store.Store
	w       *watcher
	stop    context.CancelFunc
	wait    func() *linearkv.History
	h       *linearkv.History
	started time.Time

	mu      sync.Mutex
	faulted map[string]bool
}

// newScenario makes n namespaces and starts the first voters agents in
// them (cp-1 bootstraps, the rest join one at a time through learners)
// and a coordinator candidate on cp-1, and waits for those voters. opts
// set the cluster up before any agent starts.
func newScenario(t *testing.T, name string, n, voters int, opts ...func(*cluster)) *scenario {
	t.Helper()
	c := newCluster(t, n)
	for _, o := range opts {
		o(c)
	}
	s := &scenario{t: t, name: name, c: c, faulted: map[string]bool{}}
	c.startAgent(0)
	s.cli = c.client()
	c.waitVoters(s.cli, 60*time.Second, c.nodes[0].name)
	c.startCoordinator(0)
	// store.New takes its client over (scopes it to the prefix).
	st, err := store.New(c.client(), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	s.st = st
	s.allowVoters(5)
	var names []string
	for i := range voters {
		if i > 0 {
			c.startAgent(i)
		}
		names = append(names, c.nodes[i].name)
	}
	c.waitVoters(s.cli, 120*time.Second, names...)
	return s
}

// fault marks node as faulted on purpose (the quorum invariant counts it
// as answering) or clears it.
func (s *scenario) fault(node string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faulted[node] = on
}

func (s *scenario) faultedNodes() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]bool{}
	for k, v := range s.faulted {
		out[k] = v
	}
	return out
}

// startWorkload starts the invariant watcher and clients clients.
func (s *scenario) startWorkload(clients int, seed uint64) {
	s.t.Helper()
	w := newWatcher(s.cli, s.st, s.faultedNodes)
	s.w = w
	ctx, cancel := context.WithCancel(context.Background())
	var done sync.WaitGroup
	done.Add(1)
	go func() { defer done.Done(); w.run(ctx) }()
	h, wait := linearkv.Run(ctx, s.c.client, clients, seed, 0)
	s.h = h
	s.stop = func() { cancel(); done.Wait() }
	s.wait = wait
	s.started = time.Now()
	s.t.Cleanup(func() { cancel(); done.Wait(); wait() })
}

// leader is the coordinator leader's candidate name.
func (s *scenario) leader() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	name, _ := s.st.Leader(ctx)
	return name
}

// waitLeader waits until candidate name leads.
func (s *scenario) waitLeader(within time.Duration, name string) {
	s.t.Helper()
	testwait.For(s.t, within, name+" to lead", func() (bool, string) {
		l := s.leader()
		return l == name, "leader " + l
	})
}

// finish stops the workload, checks the history and the invariants, and
// records the run. converged is how long the scenario took to converge
// after its fault (0 if it states none).
func (s *scenario) finish(converged time.Duration) {
	s.t.Helper()
	s.stop()
	h := s.wait()
	v := linearkv.Check(s.t, s.cli, h, filepath.Join(reportDir(), strings.ReplaceAll(s.name, "/", "_")+".html"))
	viol := s.w.Violations()
	record(row{Scenario: s.name, Violations: len(viol), Lost: len(v.Lost), Verdict: string(v.Linearizable),
		Stall: v.Stall, Converge: converged, Ops: v.Ops})
	s.t.Logf("%s: %d ops (%d failed or unknown), linearizable %s, %d lost, longest stall %s, converged in %s",
		s.name, v.Ops, v.Failed, v.Linearizable, len(v.Lost), v.Stall.Round(time.Millisecond), converged.Round(time.Millisecond))
	if v.Ops == 0 {
		s.t.Error("the clients recorded no operation")
	}
	if v.Linearizable != "Ok" {
		s.t.Errorf("history is %s, not linearizable", v.Linearizable)
	}
	if len(v.Lost) > 0 {
		s.t.Errorf("%d acknowledged writes lost: %v", len(v.Lost), v.Lost[:min(len(v.Lost), 10)])
	}
	if len(viol) > 0 {
		s.t.Errorf("invariants breached:\n%s", strings.Join(viol, "\n"))
	}
}

func fmtDur(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

// waitWrites waits until the clients have had n more writes acknowledged.
func (s *scenario) waitWrites(within time.Duration, n int) {
	s.t.Helper()
	from := s.h.Acked()
	testwait.True(s.t, within, fmt.Sprintf("%d more acknowledged writes", n), func() bool { return s.h.Acked() >= from+n })
}

// waitCaughtUp waits until every voter answers and has applied the
// leader's commit index as seen when the wait began.
func (s *scenario) waitCaughtUp(within time.Duration) {
	s.t.Helper()
	var target uint64
	testwait.For(s.t, within, "every voter caught up", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := s.cli.MemberList(ctx)
		if err != nil {
			return false, err.Error()
		}
		var behind []string
		for _, m := range resp.Members {
			if len(m.ClientURLs) == 0 {
				return false, m.Name + " not started"
			}
			cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
			st, err := s.cli.Status(cctx, m.ClientURLs[0])
			ccancel()
			if err != nil {
				behind = append(behind, m.Name+": "+err.Error())
				continue
			}
			if target == 0 && st.Leader == m.ID {
				target = st.RaftAppliedIndex
			}
			if target == 0 || st.RaftAppliedIndex < target {
				behind = append(behind, fmt.Sprintf("%s at %d", m.Name, st.RaftAppliedIndex))
			}
		}
		return len(behind) == 0, fmt.Sprintf("target %d; %v", target, behind)
	})
}

// follower is the index of a node whose member does not lead etcd.
func (s *scenario) follower() int {
	s.t.Helper()
	var idx int
	testwait.For(s.t, 20*time.Second, "an etcd follower", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		for i := len(s.c.nodes) - 1; i >= 0; i-- {
			st, err := s.cli.Status(ctx, s.c.clientURL(i))
			if err == nil && st.Leader != 0 && st.Leader != st.Header.MemberId {
				idx = i
				return true, ""
			}
		}
		return false, "no member answers as a follower"
	})
	return idx
}

// revision is the store's current revision.
func (s *scenario) revision() int64 {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rev, err := s.st.Revision(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	return rev
}

// allowVoters sets the EtcdCluster's spec.voters to n once the leader has
// written the bootstrap object, so that a fourth node joins as a voter
// rather than waiting as a standby. It edits the stored JSON, leaving
// every other field as it is.
func (s *scenario) allowVoters(n int) {
	s.t.Helper()
	testwait.For(s.t, 60*time.Second, fmt.Sprintf("spec.voters set to %d", n), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		kv, err := s.st.GetKV(ctx, store.EtcdClusterKey)
		if err != nil {
			return false, err.Error()
		}
		var obj map[string]any
		if err := json.Unmarshal(kv.Value, &obj); err != nil {
			s.t.Fatalf("decode the EtcdCluster: %v", err)
		}
		spec, _ := obj["spec"].(map[string]any)
		if spec == nil {
			spec = map[string]any{}
			obj["spec"] = spec
		}
		spec["voters"] = n
		b, err := json.Marshal(obj)
		if err != nil {
			s.t.Fatal(err)
		}
		_, err = s.st.Txn(ctx, []clientv3.Cmp{store.Unchanged(store.EtcdClusterKey, kv.ModRevision)}, clientv3.OpPut(store.EtcdClusterKey, string(b)))
		return err == nil, fmt.Sprint(err)
	})
}
