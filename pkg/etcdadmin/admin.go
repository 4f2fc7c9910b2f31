// Package etcdadmin observes and changes an etcd cluster's membership
// through the client API: member list and per-member status with fail-fast
// timeouts, learner add, promote through voters, remove, and leader moves.
package etcdadmin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/membership"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrClosed is returned by calls to one member after Close.
var ErrClosed = errors.New("etcdadmin: closed")

// Admin performs membership calls. Calls to a single member are bounded by
// the health timeout so one dead member never stalls the caller; they go
// through one long-lived client per member (memberClients), made on first
// use with the TLS identity of the cluster-wide client and closed when the
// member leaves the member list or the Admin closes. Close it when done;
// closing the cluster-wide client closes it too.
type Admin struct {
	cli           *clientv3.Client
	healthTimeout atomic.Int64 // nanoseconds; see SetHealthTimeout
	newRetry      func() backoff.BackOff
	dialTimeout   time.Duration
	members       *memberClients
	stopAfter     func() bool
}

// Option configures an Admin.
type Option func(*Admin)

// WithRetry sets the backoff used for retryable membership errors: newB
// returns a fresh one for each call.
func WithRetry(newB func() backoff.BackOff) Option { return func(a *Admin) { a.newRetry = newB } }

// New returns an Admin that uses cli for cluster-wide calls.
func New(cli *clientv3.Client, healthTimeout time.Duration, opts ...Option) *Admin {
	a := &Admin{
		cli:         cli,
		dialTimeout: healthTimeout,
		newRetry:    defaultRetry,
	}
	a.healthTimeout.Store(int64(healthTimeout))
	for _, o := range opts {
		o(a)
	}
	a.members = newMemberClients(etcdclient.TLSOf(cli), a.dialTimeout)
	a.stopAfter = context.AfterFunc(cli.Ctx(), a.members.close)
	return a
}

// SetHealthTimeout changes the bound of each call to one member, from the
// next call on (the leader applies its EtcdCluster's spec.policy.healthTimeout
// with it); d <= 0 is ignored. The dial timeout of member clients stays the
// one New was given.
func (a *Admin) SetHealthTimeout(d time.Duration) {
	if d > 0 {
		a.healthTimeout.Store(int64(d))
	}
}

// HealthTimeout returns the bound of each call to one member.
func (a *Admin) HealthTimeout() time.Duration { return a.health() }

func (a *Admin) health() time.Duration { return time.Duration(a.healthTimeout.Load()) }

// Close closes the per-member clients; calls to one member fail with
// ErrClosed afterwards. It is idempotent.
func (a *Admin) Close() {
	a.stopAfter()
	a.members.close()
}

// lostAnswer reports whether err leaves open whether a request took
// effect: the answering member stopped, its connection broke, or it gave
// up waiting for the change to apply.
func lostAnswer(err error) bool {
	return status.Code(err) == codes.Unavailable || isEtcdError(err, rpctypes.ErrStopped) ||
		isEtcdError(err, rpctypes.ErrTimeout) || isEtcdError(err, rpctypes.ErrTimeoutDueToConnectionLost) ||
		stoppingAnswer(err)
}

// stoppingAnswer reports the answer of a member whose gRPC server has
// stopped while its HTTP server still serves: etcd serves gRPC over TLS
// through its HTTP server, and a stopped gRPC server answers a request
// with an empty 200, which the client reports as an unknown error about a
// missing content type. The request never reached etcd.
func stoppingAnswer(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unknown &&
		strings.Contains(st.Message(), "HTTP status code received from server: 200") &&
		strings.Contains(st.Message(), "missing HTTP content-type")
}

// Retryable reports the membership errors that pass by themselves: a
// cluster that just changed ("unhealthy cluster"), a learner slot still
// taken, a learner not yet in sync or not serving yet, or a lost leader.
// It matches etcd's typed errors (rpctypes), as the client returns them or
// as gRPC status errors it did not convert.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errAskAgain) || errors.Is(err, ErrNotServing) {
		return true
	}
	for _, target := range retryableErrors {
		if isEtcdError(err, target) {
			return true
		}
	}
	return false
}

// Transient reports the errors of any etcd request that pass by
// themselves: Retryable's, and a request that timed out, lost its
// connection or its member, or was checked against an auth revision that
// changed before it applied. An error it does not name (a permission
// denied, a file missing) is not expected to pass.
func Transient(err error) bool {
	return Retryable(err) || lostAnswer(err) || status.Code(err) == codes.DeadlineExceeded ||
		isEtcdError(err, rpctypes.ErrAuthOldRevision)
}

// isEtcdError reports whether err is etcd's error target: the typed
// rpctypes.EtcdError the client returns, anywhere in err's chain, or a
// gRPC status error that rpctypes.Error converts to it.
func isEtcdError(err, target error) bool {
	if errors.Is(err, target) {
		return true
	}
	var st interface {
		error
		GRPCStatus() *status.Status
	}
	return errors.As(err, &st) && errors.Is(rpctypes.Error(st), target)
}

// errAskAgain marks an error whose request may have taken effect and is
// safe to send again (Remove's ErrStopped).
var errAskAgain = errors.New("etcdadmin: the member that answered is stopping")

var retryableErrors = []error{
	rpctypes.ErrUnhealthy, rpctypes.ErrTooManyLearners, rpctypes.ErrMemberLearnerNotReady,
	rpctypes.ErrNoLeader, rpctypes.ErrNotCapable, rpctypes.ErrLeaderChanged, rpctypes.ErrTimeoutDueToLeaderFail,
}

// Observe lists the members and asks each for its status, in parallel. It
// fails only when the member list cannot be read.
func (a *Admin) Observe(ctx context.Context) ([]membership.Member, error) {
	lctx, cancel := context.WithTimeout(ctx, a.health())
	defer cancel()
	resp, err := a.cli.MemberList(lctx, clientv3.WithSerializable())
	if err != nil {
		return nil, fmt.Errorf("etcdadmin: member list: %w", err)
	}
	out := make([]membership.Member, len(resp.Members))
	leaders := make([]uint64, len(resp.Members))
	present := map[string]bool{}
	for _, m := range resp.Members {
		for _, u := range m.ClientURLs {
			present[u] = true
		}
	}
	// The clients of members that left are closed.
	a.members.retain(present)
	var wg sync.WaitGroup
	for i, m := range resp.Members {
		out[i] = membership.Member{ID: api.MemberID(m.ID), Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, Learner: m.IsLearner}
		if len(m.ClientURLs) == 0 {
			continue
		}
		wg.Add(1)
		go func(i int, url string) {
			defer wg.Done()
			st, err := a.status(ctx, url)
			if err != nil || st.Header == nil || st.Header.MemberId != uint64(out[i].ID) {
				// Not answered, or not by the member itself (another
				// member at its address): it does not serve.
				return
			}
			out[i].Healthy = len(st.Errors) == 0
			out[i].NoSpace = slices.ContainsFunc(st.Errors, func(e string) bool { return strings.Contains(e, AlarmNoSpace) })
			out[i].RaftIndex = st.RaftIndex
			out[i].Version, out[i].StorageVersion = st.Version, st.StorageVersion
			leaders[i] = st.Leader
		}(i, m.ClientURLs[0])
	}
	wg.Wait()
	// The leader is the one most healthy members agree on.
	votes := map[uint64]int{}
	for i, l := range leaders {
		if l != 0 && out[i].Healthy {
			votes[l]++
		}
	}
	var leader uint64
	for id, n := range votes {
		if n > votes[leader] || (n == votes[leader] && id < leader) {
			leader = id
		}
	}
	for i := range out {
		out[i].Leader = leader != 0 && uint64(out[i].ID) == leader
	}
	return out, nil
}

// status calls Status on one member with the fail-fast timeout.
func (a *Admin) status(ctx context.Context, url string) (*clientv3.StatusResponse, error) {
	sctx, cancel := context.WithTimeout(ctx, a.health())
	defer cancel()
	return a.statusWithin(sctx, url)
}

// statusWithin calls Status on one member, over its own client.
func (a *Admin) statusWithin(ctx context.Context, url string) (*clientv3.StatusResponse, error) {
	cli, err := a.members.get(url)
	if err != nil {
		return nil, err
	}
	st, err := cli.Status(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("etcdadmin: status of %s: %w", url, err)
	}
	return st, nil
}

// AddLearner adds a learner with peerURL, retrying the errors that pass
// every AddEvery, and returns its ID and the --initial-cluster value it
// must start with.
func (a *Admin) AddLearner(ctx context.Context, name, peerURL string) (api.MemberID, string, error) {
	var resp *clientv3.MemberAddResponse
	err := a.retryWith(ctx, backoff.NewConstantBackOff(AddEvery), func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, 2*a.health())
		defer cancel()
		var err error
		resp, err = a.cli.MemberAddAsLearner(clientv3.WithRequireLeader(cctx), []string{peerURL})
		return err
	})
	if err != nil {
		return 0, "", fmt.Errorf("etcdadmin: add learner %s: %w", peerURL, err)
	}
	return api.MemberID(resp.Member.ID), InitialCluster(resp.Members, resp.Member.ID, name), nil
}

// InitialCluster renders --initial-cluster for the new member id, named
// name, from the member list etcd returned when it was added.
func InitialCluster(members []*etcdserverpb.Member, id uint64, name string) string {
	ms := make([]membership.Member, len(members))
	for i, m := range members {
		ms[i] = membership.Member{ID: api.MemberID(m.ID), Name: m.Name, PeerURLs: m.PeerURLs}
	}
	return membership.InitialCluster(ms, api.MemberID(id), name)
}

// Remove removes member id. A member that is already gone is not an error.
func (a *Admin) Remove(ctx context.Context, id api.MemberID) error {
	err := a.retry(ctx, func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, 2*a.health())
		defer cancel()
		_, err := a.cli.MemberRemove(clientv3.WithRequireLeader(cctx), uint64(id))
		if lostAnswer(err) {
			// The member that answered is stopping, its connection broke
			// (a reset) or it timed out waiting for the change to apply:
			// most often it is the one removed, and the removal has
			// committed before its answer was lost. Ask again (another
			// endpoint answers): ErrMemberNotFound then means done, so
			// the caller always learns that the removal happened.
			return fmt.Errorf("%w: %w", errAskAgain, err)
		}
		return err
	})
	if err != nil && !isEtcdError(err, rpctypes.ErrMemberNotFound) {
		return fmt.Errorf("etcdadmin: remove %s: %w", id, err)
	}
	return nil
}

// MoveLeader asks the leader at leaderURL to hand leadership to member to,
// over the leader's member client.
func (a *Admin) MoveLeader(ctx context.Context, leaderURL string, to api.MemberID) error {
	cli, err := a.members.get(leaderURL)
	if err != nil {
		return err
	}
	err = a.retry(ctx, func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, 5*a.health())
		defer cancel()
		_, err := cli.MoveLeader(cctx, uint64(to))
		return err
	})
	if err != nil {
		return fmt.Errorf("etcdadmin: move leader to %s: %w", to, err)
	}
	return nil
}

// dial makes a short-lived client bound to exactly these endpoints, with
// the TLS identity of a.cli (Promote when the leader is not known).
func (a *Admin) dial(endpoints []string) (*clientv3.Client, error) {
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: endpoints, DialTimeout: a.dialTimeout, TLS: etcdclient.TLSOf(a.cli)})
	if err != nil {
		return nil, fmt.Errorf("etcdadmin: dial %v: %w", endpoints, err)
	}
	return cli, nil
}
