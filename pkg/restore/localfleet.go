package restore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/member"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// LocalMember is one control-plane member whose data dir and runtime this
// process holds.
type LocalMember struct {
	Name, DataDir, PeerURL, ClientURL string
	Runtime                           member.Runtime
	TLS                               *member.TLS
	// private is the loopback client URL the member serves on alone
	// while a recovery writes its hold (serveHeld); "" otherwise.
	private string
}

// LocalFleet is a Fleet of members run by this process (member.Runtime):
// the test harness's, the benchmark's, and nicoctl's on a host whose
// agents are stopped.
type LocalFleet struct {
	Members []*LocalMember
	// ClusterToken is the new cluster's initial-cluster token (its ID
	// derives from it and the target's peer URL).
	ClusterToken string
	ClientTLS    *tls.Config
	Log          *slog.Logger
	// PromoteTimeout bounds a learner's catching up; 0 means 5 minutes.
	PromoteTimeout time.Duration
	Now            func() time.Time
	// Peers are client URLs of the new cluster's members that other
	// processes serve (a host's agent rejoining its member to a cluster
	// served elsewhere); Client dials them beside Members that serve.
	Peers []string
}

func (f *LocalFleet) member(name string) (*LocalMember, error) {
	for _, m := range f.Members {
		if m.Name == name {
			return m, nil
		}
	}
	names := make([]string, 0, len(f.Members))
	for _, m := range f.Members {
		names = append(names, m.Name)
	}
	return nil, fmt.Errorf("restore: node %q is not a member (members: %s)", name, strings.Join(names, ", "))
}

func (f *LocalFleet) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

func (f *LocalFleet) log() *slog.Logger {
	if f.Log != nil {
		return f.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Stop implements Fleet.
func (f *LocalFleet) Stop(ctx context.Context, node string, fence *member.Fence) error {
	m, err := f.member(node)
	if err != nil {
		return err
	}
	if err := m.Runtime.Stop(ctx); err != nil {
		return err
	}
	if fence != nil {
		if err := member.WriteFence(m.DataDir, *fence); err != nil {
			return err
		}
	}
	// A member this process does not run (its agent's) must be down too.
	if err := f.answers(ctx, m); err == nil {
		return fmt.Errorf("%w: %s still serves at %s: stop its nico-agent (its data dir is fenced now: it will not start again) and run the same command again, the journal resumes", ErrStillServing, node, m.ClientURL)
	}
	return nil
}

// ErrStillServing: a member that must be stopped still answers.
var ErrStillServing = errors.New("restore: member still serves")

// answers asks m's client URL for its status within a second; nothing
// listening there is an answer at once.
func (f *LocalFleet) answers(ctx context.Context, m *LocalMember) error {
	u, err := url.Parse(m.ClientURL)
	if err != nil {
		return err
	}
	conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return err
	}
	conn.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: time.Second, TLS: f.ClientTLS, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = cli.Status(sctx, m.ClientURL)
	return err
}

// Restore implements Fleet with etcdutl's snapshot restore library.
func (f *LocalFleet) Restore(ctx context.Context, node, snap string, bump uint64) error {
	m, err := f.member(node)
	if err != nil {
		return err
	}
	// The old data dir (fenced by the stop) is kept as the wiped copy; an
	// unfenced one is what a restore killed mid-way left: removed, so that
	// the copy of the old data survives a retry.
	if _, fenced, _ := member.ReadFence(m.DataDir); fenced {
		if _, err := member.Wipe(m.DataDir, f.now()); err != nil {
			return err
		}
	} else if err := os.RemoveAll(m.DataDir); err != nil {
		return fmt.Errorf("restore: remove a partial restore in %s: %w", m.DataDir, err)
	}
	err = snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath:        snap,
		Name:                m.Name,
		OutputDataDir:       m.DataDir,
		PeerURLs:            []string{m.PeerURL},
		InitialCluster:      m.Name + "=" + m.PeerURL,
		InitialClusterToken: f.ClusterToken,
		RevisionBump:        bump,
		MarkCompacted:       bump > 0,
	})
	if err != nil {
		return fmt.Errorf("restore: etcdutl snapshot restore into %s: %w", m.DataDir, err)
	}
	return nil
}

// Serve implements Fleet.
func (f *LocalFleet) Serve(ctx context.Context, node string, hold *FirstHold) (uint64, error) {
	m, err := f.member(node)
	if err != nil {
		return 0, err
	}
	if hold != nil {
		return f.serveHeld(ctx, m, hold)
	}
	if m.private != "" && !isDone(m.Runtime.Done()) {
		return 0, fmt.Errorf("%w: %s serves only at %s, for a recovery whose hold is not written yet: run the recovery again", ErrNotHeld, node, m.private)
	}
	if !isDone(m.Runtime.Done()) {
		return f.clusterID(ctx, m)
	}
	if err := m.Runtime.Start(ctx, f.config(m, "", member.StateNew, false)); err != nil {
		return 0, err
	}
	return f.clusterID(ctx, m)
}

func (f *LocalFleet) config(m *LocalMember, initial, state string, force bool) member.Config {
	return member.Config{Name: m.Name, DataDir: m.DataDir, PeerURL: m.PeerURL, ClientURL: m.ClientURL,
		InitialCluster: initial, ClusterState: state, ClusterToken: f.ClusterToken, TLS: m.TLS,
		ForceNewCluster: force, Logger: f.log()}
}

// clusterID asks m for its cluster ID and records it in m's marker.
func (f *LocalFleet) clusterID(ctx context.Context, m *LocalMember) (uint64, error) {
	cli, err := f.dial(m.ClientURL)
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	return f.recordCluster(ctx, m, cli, m.ClientURL)
}

// recordCluster asks the member at url (through cli) for its cluster ID
// and records it in m's marker.
func (f *LocalFleet) recordCluster(ctx context.Context, m *LocalMember, cli *clientv3.Client, url string) (uint64, error) {
	st, err := cli.Status(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("restore: status of %s: %w", m.Name, err)
	}
	mk := member.Marker{Name: m.Name, MemberID: st.Header.MemberId, ClusterID: st.Header.ClusterId, WrittenAt: f.now(), EtcdVersion: st.Version}
	if err := member.WriteMarker(m.DataDir, mk); err != nil {
		return 0, err
	}
	return st.Header.ClusterId, nil
}

func (f *LocalFleet) dial(eps ...string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, TLS: f.ClientTLS, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("restore: dial %v: %w", eps, err)
	}
	return cli, nil
}

// Client implements Fleet: the members that serve.
func (f *LocalFleet) Client(ctx context.Context) (*clientv3.Client, error) {
	eps := slices.Clone(f.Peers)
	for _, m := range f.Members {
		if !isDone(m.Runtime.Done()) {
			eps = append(eps, m.ClientURL)
		}
	}
	if len(eps) == 0 {
		return nil, errors.New("restore: no member serves")
	}
	return f.dial(eps...)
}

// Rejoin implements Fleet: wipe, learner add, start, promote once in sync.
func (f *LocalFleet) Rejoin(ctx context.Context, node string) error {
	m, err := f.member(node)
	if err != nil {
		return err
	}
	cli, err := f.Client(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	list, err := cli.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("restore: member list: %w", err)
	}
	var self *uint64
	var learner bool
	for _, x := range list.Members {
		if slices.Contains(x.PeerURLs, m.PeerURL) {
			id := x.ID
			self, learner = &id, x.IsLearner
		}
	}
	if mk, ok, _ := member.ReadMarker(m.DataDir); self != nil && !learner && ok && mk.ClusterID == list.Header.ClusterId && mk.MemberID == *self {
		_, err := f.Serve(ctx, node, nil) // a voter already: a resumed run
		return err
	}
	if err := m.Runtime.Stop(ctx); err != nil {
		return err
	}
	if _, err := member.Wipe(m.DataDir, f.now()); err != nil {
		return err
	}
	if self == nil {
		resp, err := f.addLearner(ctx, cli, m.PeerURL)
		if err != nil {
			return fmt.Errorf("restore: add %s as a learner: %w", node, err)
		}
		list.Members, self = resp.Members, &resp.Member.ID
		if err := f.waitListed(ctx, list.Members, *self); err != nil {
			return fmt.Errorf("restore: add %s as a learner: %w", node, err)
		}
	}
	var initial []string
	for _, x := range list.Members {
		name := x.Name
		if x.ID == *self {
			name = m.Name
		}
		for _, u := range x.PeerURLs {
			initial = append(initial, name+"="+u)
		}
	}
	if err := m.Runtime.Start(ctx, f.config(m, strings.Join(initial, ","), member.StateExisting, false)); err != nil {
		return fmt.Errorf("restore: start learner %s: %w", node, err)
	}
	if err := f.promote(ctx, cli, *self); err != nil {
		return fmt.Errorf("restore: promote %s: %w", node, err)
	}
	_, err = f.clusterID(ctx, m)
	return err
}

// addLearner adds peerURL as a learner, asking again while etcd refuses
// for a leader not yet connected to a quorum for 5 s (its HealthInterval:
// the second rejoin of a row waits for the first new voter).
func (f *LocalFleet) addLearner(ctx context.Context, cli *clientv3.Client, peerURL string) (*clientv3.MemberAddResponse, error) {
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := cli.MemberAddAsLearner(actx, []string{peerURL})
		if err == nil || !strings.Contains(err.Error(), "unhealthy cluster") {
			return resp, err
		}
		select {
		case <-actx.Done():
			return nil, fmt.Errorf("%w (last: %w)", actx.Err(), err)
		case <-tick.C:
		}
	}
}

// waitListed waits until every voter of members lists id in its own view
// of the membership (a serializable member list). A new member takes the
// cluster from the first peer that answers and refuses to start ("member
// count is unequal") when that peer has not applied its add yet.
func (f *LocalFleet) waitListed(ctx context.Context, members []*etcdserverpb.Member, id uint64) error {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, x := range members {
		if x.ID == id || x.IsLearner || len(x.ClientURLs) == 0 {
			continue
		}
		if err := f.waitListedBy(wctx, x, id); err != nil {
			return err
		}
	}
	return nil
}

// waitListedBy waits until voter x lists id.
func (f *LocalFleet) waitListedBy(ctx context.Context, x *etcdserverpb.Member, id uint64) error {
	cli, err := f.dial(x.ClientURLs...)
	if err != nil {
		return err
	}
	defer cli.Close()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := cli.MemberList(ctx, clientv3.WithSerializable())
		if err == nil && slices.ContainsFunc(resp.Members, func(m *etcdserverpb.Member) bool { return m.ID == id }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("member %s does not list the learner %x: %w (last error: %v)", x.Name, id, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// promote asks etcd to promote id until the learner is in sync.
func (f *LocalFleet) promote(ctx context.Context, cli *clientv3.Client, id uint64) error {
	d := f.PromoteTimeout
	if d == 0 {
		d = 5 * time.Minute
	}
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := cli.MemberPromote(pctx, id)
		if err == nil || strings.Contains(err.Error(), "not a learner") {
			return nil
		}
		if !strings.Contains(err.Error(), "in sync") && !strings.Contains(err.Error(), "not ready") {
			f.log().Debug("promote", "member", fmt.Sprintf("%x", id), "err", err)
		}
		select {
		case <-pctx.Done():
			return fmt.Errorf("learner %x not promoted within %s: %w (last: %w)", id, d, pctx.Err(), err)
		case <-tick.C:
		}
	}
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Unfence removes the fences that operation by wrote (an aborted restore
// that stopped nothing yet); other fences stay.
func (f *LocalFleet) Unfence(by string) error {
	for _, m := range f.Members {
		fence, ok, err := member.ReadFence(m.DataDir)
		if err != nil {
			return err
		}
		if ok && fence.By == by {
			if err := os.Remove(filepath.Join(m.DataDir, member.FenceFile)); err != nil {
				return fmt.Errorf("restore: unfence %s: %w", m.Name, err)
			}
		}
	}
	return nil
}
