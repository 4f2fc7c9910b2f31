package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
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
	peer, client := etcdtest.URLs(tb)
	rt := fleetkit.EmbeddedRuntime()
	ctx, cancel := context.WithTimeout(tb.Context(), 60*time.Second)
	defer cancel()
	log := benchLogger(tb).With("arm", "kubeadm", "every", every)
	var tr *tracer
	if *flagTrace {
		tr = &tracer{}
		log = slog.New(tr.handler())
	}
	err := rt.Start(ctx, member.Config{Name: "k-0", DataDir: filepath.Join(tb.TempDir(), "etcd"), PeerURL: peer, ClientURL: client, ClusterToken: "kubeadm-bench", TLS: etcdtest.MemberTLS(tb, "k-0", peer, client), Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = rt.Stop(context.Background()) })
	return &kubeadm{tb: tb, cli: etcdtest.NewClient(tb, client), log: log, every: every, trace: tr}
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
	rt := fleetkit.EmbeddedRuntime()
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
	err = k.retryEvery(ctx, func(ctx context.Context) error {
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
