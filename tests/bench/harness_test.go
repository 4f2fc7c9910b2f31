// Package bench measures nico against real, in-process etcd members on
// loopback: how long a joining node takes to become a voter, beside a
// kubeadm-style baseline measured in the same run, and what a writing
// client sees while the cluster grows and shrinks. `make bench` runs it;
// each benchmark does its whole measurement once (-benchtime 1x), prints a
// table with b.Log and reports its key figures with b.ReportMetric.
package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/fleetkit"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	flagJoins = flag.Int("nico.joins", 10, "measured joins per arm and store size (the empty store's ratio wants 25: docs/join-speed.md)")
	flagLog   = flag.String("nico.log", "", "log agents and coordinators to stderr at this level (debug, info, warn)")
)

// Raft timings of every member in these benchmarks, nico's and the
// baseline's alike, and the settings the agents and the coordinator run
// with: the shared harness's (tests/fleetkit), as in tests/integration.
const (
	tickInterval    = fleetkit.TickInterval
	electionTimeout = fleetkit.ElectionTimeout
	agentRetry      = fleetkit.AgentRetry
	coordResync     = fleetkit.CoordResync
	healthTimeout   = fleetkit.HealthTimeout
)

// learnerPolicy is the coordinators' membership policy.
var learnerPolicy = fleetkit.DefaultPolicy

func benchLogger(tb testing.TB) *slog.Logger {
	if *flagLog == "" {
		return slog.New(slog.DiscardHandler)
	}
	log, err := logging.New(os.Stderr, *flagLog, "text")
	if err != nil {
		tb.Fatal(err)
	}
	return log
}

// fleet is the shared harness (tests/fleetkit) grown from a bootstrap
// agent and one coordinator candidate.
type fleet struct {
	*fleetkit.Fleet
	// cli is a raw client of the bootstrap member, for polls and data.
	cli *clientv3.Client
	// st is a store over the candidate's client.
	st *store.Store
	// trace, with -nico.trace, records the fleet's log (trace_test.go).
	trace *tracer
}

// node is one running agent.
type node = fleetkit.Node

// newFleet bootstraps boot and runs a coordinator, and returns once the
// member is a voter and the coordinator leads.
func newFleet(tb testing.TB, boot string) *fleet {
	return bootFleet(tb, "c-"+boot, func(f *fleet) *node { return f.Start(f.AgentConfig(boot, true)) })
}

// bootFleet starts the bootstrap agent with startBoot, waits until its
// member is a voter, asks for seven voters (the benchmarks want every
// control-plane host they start a voter; a coordinator would write its
// bootstrap default of three), then runs the candidate coord and returns
// once it leads.
func bootFleet(tb testing.TB, coord string, startBoot func(*fleet) *node) *fleet {
	f := &fleet{Fleet: fleetkit.New(tb)}
	f.Log = benchLogger(tb)
	if *flagTrace {
		f.trace = &tracer{}
		f.Log = slog.New(f.trace.handler())
		f.NewRuntime = func() member.Runtime {
			return member.NewEmbedded(member.WithTimings(tickInterval, electionTimeout), member.WithEtcdLogLevel(slog.LevelInfo))
		}
	}
	f.ClusterToken, f.Version = "nico-bench", "bench"
	n := startBoot(f)
	f.cli = etcdtest.NewClient(tb, n.Cfg.ClientURL)
	ctx, cancel := context.WithTimeout(tb.Context(), 60*time.Second)
	defer cancel()
	if _, err := watchJoin(ctx, f.cli, n.Cfg.PeerURL, time.Now())(); err != nil {
		tb.Fatalf("bootstrap %s: %v", n.Name, err)
	}
	f.SetVoters(7)
	f.st = f.StartCoordinator(coord).Store
	f.WaitLeader(60 * time.Second)
	return f
}

// grow joins control-plane agents, untimed, until the cluster has voters
// voters.
func (f *fleet) grow(tb testing.TB, voters int) {
	for i := 1; i < voters; i++ {
		ctx, cancel := context.WithTimeout(tb.Context(), 3*time.Minute)
		_, _, err := f.add(ctx, fmt.Sprintf("cp-v%d", i))
		cancel()
		if err != nil {
			tb.Fatalf("grow to %d voters: %v", voters, err)
		}
	}
}

// remove files a removal request for n, waits until the coordinator has
// done it and the agent has stopped, and deletes the node's data.
func (f *fleet) remove(ctx context.Context, n *node) error {
	r := api.NewRemoveRequest(n.Name)
	r.Metadata.CreatedAt = time.Now()
	r.Spec.RequestedBy = "bench"
	if err := f.st.Put(ctx, store.RemovalKey(n.Name), r); err != nil {
		return fmt.Errorf("request removal of %s: %w", n.Name, err)
	}
	// Waited on a watch of the request; ctx bounds the wait.
	var answer error
	err := testwait.KeyUntil(ctx, f.st.Client(), store.RemovalKey(n.Name), 24*time.Hour, func(kv *mvccpb.KeyValue) (bool, string) {
		if kv == nil {
			return true, "" // the agent clears its request once it has left
		}
		got := &api.RemoveRequest{}
		if err := store.Decode(kv, got); err != nil {
			return false, err.Error()
		}
		switch got.Status.Phase {
		case api.RemoveRefused, api.RemoveFailed:
			answer = fmt.Errorf("removal of %s: %s: %s", n.Name, got.Status.Phase, got.Status.Message)
			return true, ""
		case api.RemoveDone:
			return true, ""
		}
		return false, fmt.Sprintf("last phase %q", got.Status.Phase)
	})
	if err != nil {
		return fmt.Errorf("removal of %s: %w", n.Name, err)
	}
	if answer != nil {
		return answer
	}
	select {
	case err := <-n.Done:
		n.Done <- err
		if !errors.Is(err, agent.ErrRemoved) {
			return fmt.Errorf("removed agent %s returned %v, want ErrRemoved", n.Name, err)
		}
	case <-ctx.Done():
		return fmt.Errorf("removed agent %s did not stop: %w", n.Name, ctx.Err())
	}
	// Its member must be gone before its data dir is.
	select {
	case <-n.Runtime.Done():
	case <-ctx.Done():
		return fmt.Errorf("member of removed agent %s did not exit: %w", n.Name, ctx.Err())
	}
	f.Forget(n.Name)
	return os.RemoveAll(filepath.Dir(n.Cfg.DataDir))
}

// etcdLeader returns the node whose member leads etcd.
func (f *fleet) etcdLeader() *node {
	f.TB.Helper()
	name := f.EtcdLeader()
	n := f.Node(name)
	if n == nil {
		f.TB.Fatalf("etcd leader %q is no node of the fleet", name)
	}
	return n
}

// joinTimes are the moments, counted from the start of a join, at which the
// member list first showed the new member as added (an unstarted learner),
// named (the leader applied the learner's publish; it may not serve
// clients yet) and a voter; and how long its untimed removal took.
type joinTimes struct{ added, named, voter, removal time.Duration }

// pollEvery is how often watchJoin reads the member list (-nico.poll):
// the resolution of every join time.
var pollEvery = 20 * time.Millisecond

func init() {
	flag.DurationVar(&pollEvery, "nico.poll", pollEvery, "how often a join benchmark reads the member list (the resolution of its times)")
}

// watchJoin polls the member list (serializable, from cli's endpoint) until
// the member with peerURL is a voter; the returned func waits for that.
func watchJoin(ctx context.Context, cli *clientv3.Client, peerURL string, t0 time.Time) func() (joinTimes, error) {
	type result struct {
		jt  joinTimes
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var jt joinTimes
		for {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			resp, err := cli.MemberList(cctx, clientv3.WithSerializable())
			cancel()
			now := time.Since(t0)
			if err == nil {
				for _, m := range resp.Members {
					if !slices.Contains(m.PeerURLs, peerURL) {
						continue
					}
					if jt.added == 0 {
						jt.added = now
					}
					if jt.named == 0 && m.Name != "" {
						jt.named = now
					}
					if !m.IsLearner {
						jt.voter = now
						ch <- result{jt: jt}
						return
					}
				}
			}
			select {
			case <-ctx.Done():
				ch <- result{jt: jt, err: fmt.Errorf("member at %s not a voter: %w (seen %+v)", peerURL, ctx.Err(), jt)}
				return
			case <-time.After(pollEvery):
			}
		}
	}()
	return func() (joinTimes, error) { r := <-ch; return r.jt, r.err }
}
