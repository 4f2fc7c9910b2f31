package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/membership"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// prepareMember decides, before anything else, what to do with the local
// data dir: bootstrap a new cluster, restart the member it holds, or wipe
// it because it belongs to a removed member or to another cluster. Joining
// comes later, once the node is registered.
func (a *Agent) prepareMember(ctx context.Context) error {
	has, err := member.HasData(a.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("agent: inspect data dir: %w", err)
	}
	if has {
		if f, fenced, ferr := member.ReadFence(a.cfg.DataDir); ferr == nil && fenced {
			// A restore or recovery superseded this cluster: never serve
			// it again, join the new one through the learner path.
			backup, err := member.Wipe(a.cfg.DataDir, a.Now())
			if err != nil {
				return fmt.Errorf("agent: wipe fenced data dir: %w", err)
			}
			a.log.Warn("wiped a fenced data dir; will join the new cluster with a new member ID", "by", f.By, "copy", backup)
			return nil
		}
	}
	if !has && !a.cfg.Bootstrap {
		return nil // a fresh joiner: nothing to check against the cluster
	}
	view, verr := a.clusterView(ctx)
	if !has {
		if verr == nil {
			a.log.Warn("bootstrap is set but a cluster already answers at etcd.endpoints: joining it instead", "cluster", view.clusterID)
			return nil
		}
		if copies, _ := filepath.Glob(a.cfg.DataDir + ".wiped-*"); len(copies) > 0 {
			return fmt.Errorf("agent: bootstrap refused: this node's member data was wiped before (%s), so it belonged to a cluster; set etcd.endpoints to that cluster so it joins instead of creating a second one: %w", copies[len(copies)-1], verr)
		}
		if others := a.endpoints.others(a.cfg.ClientURL); len(others) > 0 {
			return fmt.Errorf("agent: bootstrap refused: this node reached an etcd cluster through %v before (%s) and has no member data now, so its data was lost; set etcd.endpoints to that cluster so it joins instead of creating a second one: %w", others, a.cfg.EndpointsCache, verr)
		}
		if b, ok, err := member.ReadBootstrapped(a.cfg.DataDir); ok || err != nil {
			return bootstrapRefusedAgain(a.cfg.DataDir, b, err, verr)
		}
		a.log.Info("bootstrapping a new etcd cluster", "peerURL", a.cfg.PeerURL)
		if err := a.startMember(ctx, a.cfg.Name+"="+a.cfg.PeerURL, "new"); err != nil {
			return err
		}
		return a.recordBootstrap()
	}
	marker, hasMarker, err := member.ReadMarker(a.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if hasMarker && marker.EtcdVersion != "" {
		a.useEtcdVersion(marker.EtcdVersion, "the version that last served the data dir")
	}
	if hasMarker {
		a.etcd.quota.Store(marker.QuotaBackendBytes)
	}
	if verr != nil {
		a.log.Info("restarting the member from its data; the cluster did not answer", "err", verr)
		return a.restartMember(ctx)
	}
	if reason := staleReason(view, marker, hasMarker, a.cfg.PeerURL); reason != "" {
		backup, err := member.Wipe(a.cfg.DataDir, a.Now())
		if err != nil {
			return fmt.Errorf("agent: wipe stale data dir: %w", err)
		}
		a.log.Warn("wiped stale data dir; will join with a new member ID", "reason", reason, "copy", backup)
		return nil
	}
	a.log.Info("restarting the member from its data")
	return a.restartMember(ctx)
}

// restartMember starts the member from its data dir. A member the cluster
// removed meanwhile (an agent that stopped before it could wipe it) is
// wiped instead, and the node joins anew.
func (a *Agent) restartMember(ctx context.Context) error {
	err := a.startMember(ctx, "", "existing")
	if !errors.Is(err, member.ErrRemoved) && !errors.Is(err, member.ErrFenced) {
		return err
	}
	backup, werr := member.Wipe(a.cfg.DataDir, a.Now())
	if werr != nil {
		return fmt.Errorf("agent: wipe the data dir of a removed member: %w (start: %w)", werr, err)
	}
	a.log.Warn("the cluster removed this member; wiped its data dir, will join with a new member ID", "err", err, "copy", backup)
	return nil
}

// clusterState is the cluster as seen from etcd.endpoints.
type clusterState struct {
	clusterID uint64
	members   []*etcdserverpb.Member
}

// clusterView asks the configured endpoints (never the local member, which
// is not running yet) for the member list.
func (a *Agent) clusterView(ctx context.Context) (clusterState, error) {
	var eps []string
	for _, e := range a.cfg.Endpoints {
		if e != a.cfg.ClientURL {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return clusterState{}, errors.New("no other endpoint configured")
	}
	cli, err := a.etcdClient(eps, 0)
	if err != nil {
		return clusterState{}, err
	}
	defer cli.Close()
	cctx, cancel := context.WithTimeout(ctx, a.cfg.DialTimeout)
	defer cancel()
	resp, err := cli.MemberList(cctx)
	if err != nil {
		return clusterState{}, fmt.Errorf("member list from %v: %w", eps, err)
	}
	a.readQuota(cctx, cli)
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

// startMember starts the local member and records which member and cluster
// its data dir belongs to.
func (a *Agent) startMember(ctx context.Context, initialCluster, state string) error {
	if err := a.runMember(ctx, initialCluster, state); err != nil {
		return err
	}
	return a.recordMember(ctx)
}

// runMember starts the local member and returns once it serves.
func (a *Agent) runMember(ctx context.Context, initialCluster, state string) error {
	if err := a.leaves.wait(ctx); err != nil {
		return err
	}
	quota := a.startQuota()
	err := a.runtime.Start(ctx, member.Config{
		QuotaBackendBytes: quota,
		Name:              a.cfg.Name,
		DataDir:           a.cfg.DataDir,
		PeerURL:           a.cfg.PeerURL,
		ClientURL:         a.cfg.ClientURL,
		InitialCluster:    initialCluster,
		ClusterState:      state,
		ClusterToken:      a.cfg.ClusterToken,
		TLS:               a.memberTLS(),
		Logger:            a.log,
	})
	if err != nil {
		return fmt.Errorf("agent: start member: %w", err)
	}
	a.state.memberStarted()
	a.etcd.quota.Store(quota)
	return nil
}

// recordMember asks the local member, which serves, for its version and
// IDs, and writes them to the data dir's marker.
func (a *Agent) recordMember(ctx context.Context) error {
	cli, err := a.etcdClient([]string{a.cfg.ClientURL}, 0)
	if err != nil {
		return fmt.Errorf("agent: local client: %w", err)
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, a.cfg.DialTimeout)
	defer cancel()
	st, err := cli.Status(sctx, a.cfg.ClientURL)
	if err != nil {
		return fmt.Errorf("agent: local member status: %w", err)
	}
	a.etcd.version.Store(st.Version)
	mk := member.Marker{Name: a.cfg.Name, MemberID: st.Header.MemberId, ClusterID: st.Header.ClusterId, WrittenAt: a.Now(), EtcdVersion: st.Version, QuotaBackendBytes: a.etcd.quota.Load()}
	if err := member.WriteMarker(a.cfg.DataDir, mk); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.log.Info("member serving", "member", api.MemberID(mk.MemberID), "cluster", api.MemberID(mk.ClusterID), "etcdVersion", st.Version)
	return nil
}

// stopMember stops the local member if this agent runs it, handing etcd
// leadership to a chosen healthy voter first when the member leads.
func (a *Agent) stopMember(ctx context.Context) error {
	if !a.state.memberGone() {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	a.handOffLeadership(sctx)
	return a.runtime.Stop(sctx)
}

// stopAndWipe stops the member and moves its data dir aside. It never wipes
// under a member that is still running: when the stop times out it waits
// for the member to exit (etcd's close cannot be cut short), since etcd ends
// the process when its data dir vanishes beneath it.
func (a *Agent) stopAndWipe(ctx context.Context) (string, error) {
	if err := a.stopMember(ctx); err != nil {
		a.log.Warn("member slow to stop; waiting for it before wiping its data", "err", err)
		select {
		case <-a.runtime.Done():
		case <-ctx.Done():
			return "", fmt.Errorf("agent: wipe: member still running: %w", ctx.Err())
		}
	}
	return member.Wipe(a.cfg.DataDir, a.Now())
}

// handOffLeadership moves etcd leadership away from the local member, if it
// leads, to the most caught-up healthy voter. etcd would otherwise pick a
// peer by itself on a graceful stop; this picks one known to be healthy.
func (a *Agent) handOffLeadership(ctx context.Context) {
	if a.client() == nil {
		return
	}
	adm := etcdadmin.New(a.client(), time.Second)
	defer adm.Close()
	ms, err := adm.Observe(ctx)
	if err != nil {
		return
	}
	var self *membership.Member
	for i := range ms {
		ms[i].Node = ms[i].Name // started members are named after their node
		if slices.Contains(ms[i].PeerURLs, a.cfg.PeerURL) {
			self = &ms[i]
		}
	}
	if self == nil || !self.Leader {
		return
	}
	to := membership.Successor(ms, self.ID)
	if to == nil {
		a.log.Warn("this member leads etcd and no healthy voter can take over; stopping anyway")
		return
	}
	if err := adm.MoveLeader(ctx, a.cfg.ClientURL, to.ID); err != nil {
		a.log.Warn("could not hand off etcd leadership before stopping", "to", to.Name, "err", err)
		return
	}
	a.log.Info("handed etcd leadership off before stopping", "to", to.Name)
}

// selfMember finds this node's member by its peer URL.
func (a *Agent) selfMember(ctx context.Context) (id, cluster api.MemberID, learner bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, a.cfg.DialTimeout)
	defer cancel()
	resp, err := a.client().MemberList(cctx)
	if err != nil {
		return 0, 0, false, err
	}
	for _, m := range resp.Members {
		if slices.Contains(m.PeerURLs, a.cfg.PeerURL) {
			return api.MemberID(m.ID), api.MemberID(resp.Header.ClusterId), m.IsLearner, nil
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
func (a *Agent) recordBootstrap() error {
	mk, _, err := member.ReadMarker(a.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if err := member.WriteBootstrapped(a.cfg.DataDir, member.Bootstrapped{ClusterID: mk.ClusterID, MemberID: mk.MemberID, At: a.Now().UTC()}); err != nil {
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
