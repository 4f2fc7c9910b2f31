package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// localMember runs this node's etcd member: what to do with the data dir
// at start (prepare), the member's start, its marker, its stop (leadership
// handed off first) and the wipe of its data, the etcd version and
// database quota it starts with. It knows the agent's configuration, the
// member runtime and the state it shares with the agent (nodeState,
// memberRun), and reaches the cluster through the store client and dial.
type localMember struct {
	cfg       *Config
	runtime   member.Runtime
	state     *nodeState
	run       *memberRun
	leaves    *memberLeaves
	endpoints *endpointsCache
	log       *slog.Logger
	now       func() time.Time
	// client is the store client (nil before the agent connects).
	client func() *clientv3.Client
	// dial is a client of the agent's identity for endpoints.
	dial func(endpoints []string) (*clientv3.Client, error)
	// tls is the member's certificates (nil: plaintext).
	tls func() *member.TLS
}

// prepare decides, before anything else, what to do with the local
// data dir: bootstrap a new cluster, restart the member it holds, or wipe
// it because it belongs to a removed member or to another cluster. Joining
// comes later, once the node is registered.
func (m *localMember) prepare(ctx context.Context) error {
	has, err := member.HasData(m.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("agent: inspect data dir: %w", err)
	}
	if has {
		if f, fenced, ferr := member.ReadFence(m.cfg.DataDir); ferr == nil && fenced {
			// A restore or recovery superseded this cluster: never serve
			// it again, join the new one through the learner path.
			backup, err := member.Wipe(m.cfg.DataDir, m.now())
			if err != nil {
				return fmt.Errorf("agent: wipe fenced data dir: %w", err)
			}
			m.log.Warn("wiped a fenced data dir; will join the new cluster with a new member ID", "by", f.By, "copy", backup)
			return nil
		}
	}
	if !has && !m.cfg.Bootstrap {
		return nil // a fresh joiner: nothing to check against the cluster
	}
	view, verr := m.clusterView(ctx)
	if !has {
		if verr == nil {
			m.log.Warn("bootstrap is set but a cluster already answers at etcd.endpoints: joining it instead", "cluster", view.clusterID)
			return nil
		}
		if copies, _ := filepath.Glob(m.cfg.DataDir + ".wiped-*"); len(copies) > 0 {
			return fmt.Errorf("agent: bootstrap refused: this node's member data was wiped before (%s), so it belonged to a cluster; set etcd.endpoints to that cluster so it joins instead of creating a second one: %w", copies[len(copies)-1], verr)
		}
		if others := m.endpoints.others(m.cfg.ClientURL); len(others) > 0 {
			return fmt.Errorf("agent: bootstrap refused: this node reached an etcd cluster through %v before (%s) and has no member data now, so its data was lost; set etcd.endpoints to that cluster so it joins instead of creating a second one: %w", others, m.cfg.EndpointsCache, verr)
		}
		if b, ok, err := member.ReadBootstrapped(m.cfg.DataDir); ok || err != nil {
			return bootstrapRefusedAgain(m.cfg.DataDir, b, err, verr)
		}
		m.log.Info("bootstrapping a new etcd cluster", "peerURL", m.cfg.PeerURL)
		if err := m.start(ctx, m.cfg.Name+"="+m.cfg.PeerURL, "new"); err != nil {
			return err
		}
		return m.recordBootstrap()
	}
	marker, hasMarker, err := member.ReadMarker(m.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if hasMarker && marker.EtcdVersion != "" {
		m.useVersion(marker.EtcdVersion, "the version that last served the data dir")
	}
	if hasMarker {
		m.run.quota.Store(marker.QuotaBackendBytes)
	}
	if verr != nil {
		m.log.Info("restarting the member from its data; the cluster did not answer", "err", verr)
		return m.restart(ctx)
	}
	if reason := staleReason(view, marker, hasMarker, m.cfg.PeerURL); reason != "" {
		backup, err := member.Wipe(m.cfg.DataDir, m.now())
		if err != nil {
			return fmt.Errorf("agent: wipe stale data dir: %w", err)
		}
		m.log.Warn("wiped stale data dir; will join with a new member ID", "reason", reason, "copy", backup)
		return nil
	}
	m.log.Info("restarting the member from its data")
	return m.restart(ctx)
}

// restart starts the member from its data dir. A member the cluster
// removed meanwhile (an agent that stopped before it could wipe it) is
// wiped instead, and the node joins anew.
func (m *localMember) restart(ctx context.Context) error {
	err := m.start(ctx, "", "existing")
	if !errors.Is(err, member.ErrRemoved) && !errors.Is(err, member.ErrFenced) {
		return err
	}
	backup, werr := member.Wipe(m.cfg.DataDir, m.now())
	if werr != nil {
		return fmt.Errorf("agent: wipe the data dir of a removed member: %w (start: %w)", werr, err)
	}
	m.log.Warn("the cluster removed this member; wiped its data dir, will join with a new member ID", "err", err, "copy", backup)
	return nil
}

// clusterState is the cluster as seen from etcd.endpoints.
type clusterState struct {
	clusterID uint64
	members   []*etcdserverpb.Member
}

// clusterView asks the configured endpoints (never the local member, which
// is not running yet) for the member list.
func (m *localMember) clusterView(ctx context.Context) (clusterState, error) {
	var eps []string
	for _, e := range m.cfg.Endpoints {
		if e != m.cfg.ClientURL {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return clusterState{}, errors.New("no other endpoint configured")
	}
	cli, err := m.dial(eps)
	if err != nil {
		return clusterState{}, err
	}
	defer cli.Close()
	cctx, cancel := context.WithTimeout(ctx, m.cfg.DialTimeout)
	defer cancel()
	resp, err := cli.MemberList(cctx)
	if err != nil {
		return clusterState{}, fmt.Errorf("member list from %v: %w", eps, err)
	}
	m.readQuota(cctx, cli)
	return clusterState{clusterID: resp.Header.ClusterId, members: resp.Members}, nil
}

// staleReason says why a data dir must not be restarted, or "".
func staleReason(v clusterState, m member.Marker, hasMarker bool, peerURL string) string {
	if hasMarker && m.ClusterID != 0 && m.ClusterID != v.clusterID {
		return fmt.Sprintf("data dir belongs to cluster %s, the running cluster is %s", api.MemberID(m.ClusterID), api.MemberID(v.clusterID))
	}
	var self *etcdserverpb.Member
	for _, mem := range v.members {
		if slices.Contains(mem.PeerURLs, peerURL) {
			self = mem
		}
	}
	switch {
	case self == nil && hasMarker:
		return fmt.Sprintf("member %s was removed from the cluster", api.MemberID(m.MemberID))
	case self == nil:
		return "no member of the cluster has this node's peer URL"
	case hasMarker && m.MemberID != 0 && m.MemberID != self.ID:
		return fmt.Sprintf("data dir belongs to member %s, the cluster has %s at %s", api.MemberID(m.MemberID), api.MemberID(self.ID), peerURL)
	}
	return ""
}

// start starts the local member and records which member and cluster
// its data dir belongs to.
func (m *localMember) start(ctx context.Context, initialCluster, state string) error {
	if err := m.launch(ctx, initialCluster, state); err != nil {
		return err
	}
	return m.record(ctx)
}

// launch starts the local member and returns once it serves.
func (m *localMember) launch(ctx context.Context, initialCluster, state string) error {
	if err := m.leaves.wait(ctx); err != nil {
		return err
	}
	quota := m.startQuota()
	err := m.runtime.Start(ctx, member.Config{
		QuotaBackendBytes: quota,
		Name:              m.cfg.Name,
		DataDir:           m.cfg.DataDir,
		PeerURL:           m.cfg.PeerURL,
		ClientURL:         m.cfg.ClientURL,
		InitialCluster:    initialCluster,
		ClusterState:      state,
		ClusterToken:      m.cfg.ClusterToken,
		TLS:               m.tls(),
		Logger:            m.log,
	})
	if err != nil {
		return fmt.Errorf("agent: start member: %w", err)
	}
	m.state.memberStarted()
	m.run.quota.Store(quota)
	return nil
}

// recordWait bounds record's status calls: the member serves when it is
// started, but a loaded machine can answer its first calls late.
const recordWait = 30 * time.Second

// record asks the local member, which serves, for its version and
// IDs, and writes them to the data dir's marker. A status call that
// fails is made again, each within the dial timeout, for up to
// recordWait while the member runs; a member that exits ends it with the
// member's error (member.ErrRemoved for a removed one).
func (m *localMember) record(ctx context.Context) error {
	cli, err := m.dial([]string{m.cfg.ClientURL})
	if err != nil {
		return fmt.Errorf("agent: local client: %w", err)
	}
	defer cli.Close()
	rctx, cancel := context.WithTimeout(ctx, recordWait)
	defer cancel()
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 100*time.Millisecond, 2*time.Second
	st, err := backoff.Retry(rctx, func() (*clientv3.StatusResponse, error) {
		select {
		case <-m.runtime.Done():
			return nil, backoff.Permanent(fmt.Errorf("member exited: %w", m.runtime.Err()))
		default:
		}
		sctx, cancel := context.WithTimeout(rctx, m.cfg.DialTimeout)
		defer cancel()
		return cli.Status(sctx, m.cfg.ClientURL)
	}, backoff.WithBackOff(b), backoff.WithMaxElapsedTime(recordWait), backoff.WithNotify(func(err error, next time.Duration) {
		m.log.Info("the local member's status is not answered yet; asking again", "err", err, "in", next)
	}))
	if err != nil {
		return fmt.Errorf("agent: local member status: %w", err)
	}
	m.run.version.Store(st.Version)
	mk := member.Marker{Name: m.cfg.Name, MemberID: st.Header.MemberId, ClusterID: st.Header.ClusterId, WrittenAt: m.now(), EtcdVersion: st.Version, QuotaBackendBytes: m.run.quota.Load()}
	if err := member.WriteMarker(m.cfg.DataDir, mk); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	m.log.Info("member serving", "member", api.MemberID(mk.MemberID), "cluster", api.MemberID(mk.ClusterID), "etcdVersion", st.Version)
	return nil
}

// stop stops the local member if this agent runs it, handing etcd
// leadership to a chosen healthy voter first when the member leads.
func (m *localMember) stop(ctx context.Context) error {
	if !m.state.memberGone() {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	m.handOffLeadership(sctx)
	return m.runtime.Stop(sctx)
}

// stopAndWipe stops the member and moves its data dir aside. It never wipes
// under a member that is still running: when the stop times out it waits
// for the member to exit (etcd's close cannot be cut short), since etcd ends
// the process when its data dir vanishes beneath it.
func (m *localMember) stopAndWipe(ctx context.Context) (string, error) {
	if err := m.stop(ctx); err != nil {
		m.log.Warn("member slow to stop; waiting for it before wiping its data", "err", err)
		select {
		case <-m.runtime.Done():
		case <-ctx.Done():
			return "", fmt.Errorf("agent: wipe: member still running: %w", ctx.Err())
		}
	}
	return member.Wipe(m.cfg.DataDir, m.now())
}

// handOffLeadership moves etcd leadership away from the local member, if it
// leads, to the most caught-up healthy voter. etcd would otherwise pick a
// peer by itself on a graceful stop; this picks one known to be healthy.
func (m *localMember) handOffLeadership(ctx context.Context) {
	if m.client() == nil {
		return
	}
	adm := etcdadmin.New(m.client(), time.Second)
	defer adm.Close()
	ms, err := adm.Observe(ctx)
	if err != nil {
		return
	}
	var self *membership.Member
	for i := range ms {
		ms[i].Node = ms[i].Name // started members are named after their node
		if slices.Contains(ms[i].PeerURLs, m.cfg.PeerURL) {
			self = &ms[i]
		}
	}
	if self == nil || !self.Leader {
		return
	}
	to := membership.Successor(ms, self.ID)
	if to == nil {
		m.log.Warn("this member leads etcd and no healthy voter can take over; stopping anyway")
		return
	}
	if err := adm.MoveLeader(ctx, m.cfg.ClientURL, to.ID); err != nil {
		m.log.Warn("could not hand off etcd leadership before stopping", "to", to.Name, "err", err)
		return
	}
	m.log.Info("handed etcd leadership off before stopping", "to", to.Name)
}

// self finds this node's member by its peer URL.
func (m *localMember) self(ctx context.Context) (id, cluster api.MemberID, learner bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, m.cfg.DialTimeout)
	defer cancel()
	resp, err := m.client().MemberList(cctx)
	if err != nil {
		return 0, 0, false, err
	}
	for _, mem := range resp.Members {
		if slices.Contains(mem.PeerURLs, m.cfg.PeerURL) {
			return api.MemberID(mem.ID), api.MemberID(resp.Header.ClusterId), mem.IsLearner, nil
		}
	}
	return 0, api.MemberID(resp.Header.ClusterId), false, errNoMember
}

var errNoMember = errors.New("agent: no member has this node's peer URL")

// recordBootstrap writes, beside the data dir, that this agent created a
// new cluster there (member.Bootstrapped), from the marker the member's
// start wrote: from now on a lost data dir makes the agent refuse to
// bootstrap again. The endpoints cache cannot stand in for it: it names
// the other members only once the mesh or the store has shown them, and a
// data dir lost in that window would bootstrap a second cluster with the
// first's IDs (TestWipedVoterRejoins/bootstrap-host kills the host 9 s
// after the cluster forms).
func (m *localMember) recordBootstrap() error {
	mk, _, err := member.ReadMarker(m.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if err := member.WriteBootstrapped(m.cfg.DataDir, member.Bootstrapped{ClusterID: mk.ClusterID, MemberID: mk.MemberID, At: m.now().UTC()}); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return nil
}

// bootstrapRefusedAgain is the refusal of a bootstrap host that created a
// cluster before (record b, or err reading it) and has no member data now.
func bootstrapRefusedAgain(dataDir string, b member.Bootstrapped, err, verr error) error {
	path := member.BootstrappedPath(dataDir)
	if err != nil {
		return fmt.Errorf("agent: bootstrap refused: %w; remove %s only to create a new cluster", err, path)
	}
	return fmt.Errorf("agent: bootstrap refused: this node created etcd cluster %s at %s (%s) and has no member data now, so its data was lost; set etcd.endpoints to that cluster so it joins instead of creating a second one, or remove %s to create a new cluster: %w",
		api.MemberID(b.ClusterID), b.At.Format(time.RFC3339), path, path, verr)
}

// useVersion makes the next start run etcd v when the runtime has it;
// otherwise the runtime keeps its default, and the version roll asks again.
func (m *localMember) useVersion(v, why string) {
	vr, ok := m.runtime.(member.Versioned)
	if !ok || vr.Version() == "" || vr.Version() == v {
		return // one binary of unknown version, or already v
	}
	if err := vr.UseVersion(v); err != nil {
		m.log.Warn("cannot start the member on etcd "+v, "why", why, "err", err)
		return
	}
	m.log.Info("starting the member on etcd "+v, "why", why)
}

// startQuota is the quota the next start of the member runs with.
func (m *localMember) startQuota() int64 {
	if q := m.run.wantQuota.Load(); q >= 0 {
		return q
	}
	return m.run.quota.Load()
}

// readQuota reads the EtcdCluster's quota through cli, a client of the
// other members, before a restart of the local member; a failure leaves
// the marker's quota in use.
func (m *localMember) readQuota(ctx context.Context, cli *clientv3.Client) {
	kv, _, err := store.GetUnder(ctx, cli, m.cfg.Prefix, store.EtcdClusterKey)
	if err != nil || kv == nil {
		return
	}
	ec := &api.EtcdCluster{}
	if err := store.Decode(kv, ec); err != nil {
		return
	}
	m.run.wantQuota.Store(ec.Spec.Policy.QuotaBackendBytes)
}

// runningVersion is the version the local member reported at its
// start, "" when this agent runs none.
func (m *localMember) runningVersion() string {
	if !m.state.memberRunning() {
		return ""
	}
	v, _ := m.run.version.Load().(string)
	return v
}
