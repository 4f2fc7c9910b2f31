package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/tests/fleetkit"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// kubeadmRetry is the fixed interval at which the kubeadm baseline retries
// MemberAddAsLearner and MemberPromote, as kubeadm does
// (constants.EtcdAPICallRetryInterval).
const kubeadmRetry = 500 * time.Millisecond

// tightRetry is the interval of the tight baseline: as fast as a tool can
// reasonably ask.
const tightRetry = 10 * time.Millisecond

// kubeadm is a baseline: a one-member cluster grown the way kubeadm joins
// a control-plane node, with plain client calls and fixed-interval
// polling: MemberAddAsLearner, then the member started while MemberPromote
// is retried every interval until it succeeds (kubeadm writes the static
// pod's manifest and promotes while the kubelet starts it). With
// kubeadmRetry it is kubeadm; with tightRetry, the tight loop.
type kubeadm struct {
	tb    testing.TB
	cli   *clientv3.Client
	log   *slog.Logger
	every time.Duration
	// serving holds the baseline to nico's promotion rule: MemberPromote
	// is tried only once the learner's own status is answered, by the
	// learner, at its client URL, and while it is not, one small write is
	// made after membership.NudgeAfter and then at most every NudgeEvery
	// (a learner that got its log as a snapshot needs an entry applied
	// after it to publish itself). The tight loop has it; the kubeadm arm
	// promotes as kubeadm does.
	serving bool
	// trace, with -nico.trace, records the members' log (trace_test.go).
	trace *tracer
}

// kubeadmJoin is one baseline join: its stage times and how many calls
// had to be retried.
type kubeadmJoin struct {
	joinTimes
	addRetries, promoteTries int
}

// newKubeadm starts the baseline's first member with the same runtime and
// timings as nico's members; its calls are retried every every.
func newKubeadm(tb testing.TB, every time.Duration) *kubeadm {
	return newKubeadmVoters(tb, every, 1)
}

// newKubeadmVoters is newKubeadm with a cluster of voters members, started
// side by side as one new cluster; the baseline's client talks to the
// first.
func newKubeadmVoters(tb testing.TB, every time.Duration, voters int) *kubeadm {
	log := benchLogger(tb).With("arm", "kubeadm", "every", every)
	var tr *tracer
	if *flagTrace {
		tr = &tracer{}
		log = slog.New(tr.handler())
	}
	type url struct{ peer, client string }
	urls := make([]url, voters)
	var initial []string
	for i := range urls {
		urls[i].peer, urls[i].client = etcdtest.URLs(tb)
		initial = append(initial, fmt.Sprintf("k-%d=%s", i, urls[i].peer))
	}
	ctx, cancel := context.WithTimeout(tb.Context(), 60*time.Second)
	defer cancel()
	started := make(chan error, voters)
	for i, u := range urls {
		name := fmt.Sprintf("k-%d", i)
		rt := k0Runtime()
		tb.Cleanup(func() { _ = rt.Stop(context.Background()) })
		cfg := member.Config{Name: name, DataDir: filepath.Join(tb.TempDir(), "etcd"), PeerURL: u.peer, ClientURL: u.client,
			InitialCluster: strings.Join(initial, ","), ClusterToken: "kubeadm-bench", TLS: etcdtest.MemberTLS(tb, name, u.peer, u.client), Logger: log}
		go func() { started <- rt.Start(ctx, cfg) }()
	}
	for range urls {
		if err := <-started; err != nil {
			tb.Fatal(err)
		}
	}
	return &kubeadm{tb: tb, cli: etcdtest.NewClient(tb, urls[0].client), log: log, every: every, trace: tr}
}

// k0Runtime is the baseline's member runtime: fleetkit's, with etcd's
// info log under -nico.trace (as nico's members have it there).
func k0Runtime() member.Runtime {
	if *flagTrace {
		return member.NewEmbedded(member.WithTimings(tickInterval, electionTimeout), member.WithEtcdLogLevel(slog.LevelInfo))
	}
	return fleetkit.EmbeddedRuntime()
}

// join adds a learner, starts it while promoting it until etcd lets it,
// and waits until the member list shows a voter; then, untimed, it removes
// the member again.
func (k *kubeadm) join(ctx context.Context, name string) (kubeadmJoin, error) {
	j, remove, err := k.add(ctx, name)
	t1 := time.Now()
	remove()
	j.removal = time.Since(t1)
	return j, err
}

// add is join without the removal: remove (never nil) removes the member
// and stops it.
func (k *kubeadm) add(ctx context.Context, name string) (j kubeadmJoin, remove func(), err error) {
	peer, client := etcdtest.URLs(k.tb)
	dir := k.tb.TempDir()
	tlsFiles := etcdtest.MemberTLS(k.tb, name, peer, client) // untimed, as an agent's certificates are ready before it joins
	t0 := time.Now()
	if k.trace != nil {
		k.trace.reset(t0)
		defer func() {
			k.trace.add(t0.Add(j.voter), fmt.Sprintf("bench: voter seen (added %v, named %v, voter %v)", j.added, j.named, j.voter))
			fmt.Printf("\ntrace of %s join %s:\n%s", k.every, name, k.trace.String())
			k.trace.finish()
			k.trace.reset(time.Time{})
		}()
	}
	wait := watchJoin(ctx, k.cli, peer, t0)

	var added *clientv3.MemberAddResponse
	err = k.retryEvery(ctx, func(ctx context.Context) (err error) {
		added, err = k.cli.MemberAddAsLearner(ctx, []string{peer})
		if k.trace != nil {
			k.trace.add(time.Now(), fmt.Sprintf("bench: MemberAddAsLearner: %v", err))
		}
		if err != nil {
			j.addRetries++
		}
		return err
	})
	if err != nil {
		return j, func() {}, fmt.Errorf("add learner: %w", err)
	}
	id := added.Member.ID
	rt := k0Runtime()
	started := make(chan error, 1)
	go func() {
		started <- rt.Start(ctx, member.Config{
			Name: name, DataDir: filepath.Join(dir, "etcd"), PeerURL: peer, ClientURL: client,
			InitialCluster: etcdadmin.InitialCluster(added.Members, id, name), ClusterState: member.StateExisting, ClusterToken: "kubeadm-bench", TLS: tlsFiles, Logger: k.log,
		})
	}()
	remove = func() {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = k.retryEvery(rctx, func(ctx context.Context) error { _, err := k.cli.MemberRemove(ctx, id); return err })
		<-started
		_ = rt.Stop(rctx)
		_ = os.RemoveAll(dir)
	}
	serves, done := k.servingCheck(name, client, id, t0)
	defer done()
	err = k.retryEvery(ctx, func(ctx context.Context) error {
		if err := serves(ctx); err != nil {
			return err
		}
		j.promoteTries++
		_, err := k.cli.MemberPromote(ctx, id)
		if k.trace != nil {
			k.trace.add(time.Now(), fmt.Sprintf("bench: MemberPromote: %v", err))
		}
		return err
	})
	if err != nil {
		return j, remove, fmt.Errorf("promote: %w", err)
	}
	j.joinTimes, err = wait()
	if err != nil {
		return j, remove, err
	}
	// Untimed: the member must serve before the next join.
	if err := <-started; err != nil {
		return j, remove, fmt.Errorf("start learner: %w", err)
	}
	started <- nil
	return j, remove, nil
}

// retryEvery calls fn, with a 2s bound per call, until it succeeds, every
// k.every.
func (k *kubeadm) retryEvery(ctx context.Context, fn func(context.Context) error) error {
	t := time.NewTicker(k.every)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := fn(cctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// servingCheck returns the check made before each MemberPromote try: none
// without k.serving; else the learner's status, at client, answered by
// member id itself, with the nudge while it is not. done closes its client.
func (k *kubeadm) servingCheck(name, client string, id uint64, t0 time.Time) (check func(context.Context) error, done func()) {
	if !k.serving {
		return func(context.Context) error { return nil }, func() {}
	}
	var lcli *clientv3.Client
	var nudged time.Time
	done = func() {
		if lcli != nil {
			_ = lcli.Close()
		}
	}
	return func(ctx context.Context) error {
		if lcli == nil {
			lcli = etcdtest.NewClient(k.tb, client)
		}
		sctx, cancel := context.WithTimeout(ctx, membership.NudgeAfter)
		st, err := lcli.Status(sctx, client)
		cancel()
		if err == nil && st.Header.MemberId == id {
			return nil
		}
		if time.Since(t0) >= membership.NudgeAfter && time.Since(nudged) >= membership.NudgeEvery {
			nudged = time.Now()
			if _, err := k.cli.Put(ctx, "/bench/nudge", name); err != nil {
				return err
			}
		}
		if err == nil {
			err = fmt.Errorf("member %x answered at %s, not %x", st.Header.MemberId, client, id)
		}
		return fmt.Errorf("learner does not serve: %w", err)
	}, done
}
