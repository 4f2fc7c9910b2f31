package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestExternalMember declares an etcd member nico does not run in the
// EtcdCluster: the leader adds it as a learner and publishes its start
// values in status.external; the test starts an etcd binary by hand with
// exactly those values (certificates from the fleet's CA); nico promotes
// it, counts it for quorum (a node joins after it, with two voters to
// keep healthy), and removes it once the test takes it out of the spec.
func TestExternalMember(t *testing.T) {
	t.Parallel()
	nicoctlBin(t) // built before the fleets start, outside their deadlines
	for _, bin := range etcdtest.Binaries(t) {
		t.Run("etcd-"+bin.Version, func(t *testing.T) {
			f := newFleet(t)
			f.NewRuntime = func() member.Runtime { return member.NewExec(bin.Path) }
			f.Start(f.AgentConfig("cp-1", true))
			f.WaitVoters(30*time.Second, "cp-1")
			f.StartCoordinator("c-1")
			st := f.Store()
			waitObj[api.EtcdCluster](f, 30*time.Second, store.EtcdClusterKey, "the bootstrap EtcdCluster", func(*api.EtcdCluster) bool { return true })

			peer, client := etcdtest.URLs(t)
			ext := api.EtcdMemberSpec{Name: "ext-1", Kind: api.MemberExternal, PeerURLs: []string{peer}, ClientURLs: []string{client}}
			setExternalMembers(t, st, ext)

			ec := waitObj[api.EtcdCluster](f, 60*time.Second, store.EtcdClusterKey, "ext-1's start values in status.external", func(ec *api.EtcdCluster) bool {
				return len(ec.Status.External) == 1
			})
			start := ec.Status.External[0]
			if start.Name != "ext-1" || start.InitialClusterState != "existing" || !strings.Contains(start.InitialCluster, "ext-1="+peer) || !strings.Contains(start.InitialCluster, "cp-1=") {
				t.Fatalf("start values %+v", start)
			}
			if learner, err := isLearner(f, peer); err != nil || !learner {
				t.Fatalf("ext-1 a learner before it starts: %v, %v", learner, err)
			}

			proc := startExternalEtcd(t, bin.Path, ext.Name, peer, client, start)
			f.WaitVoters(60*time.Second, "cp-1", "ext-1")
			waitObj[api.EtcdCluster](f, 30*time.Second, store.EtcdClusterKey, "status.external cleared once ext-1 is a voter", func(ec *api.EtcdCluster) bool {
				return len(ec.Status.External) == 0 && len(ec.Spec.Members) == 1
			})

			// nicoctl counts it as the planner does: a healthy voter, no ghost.
			root := etcdtest.IssueFiles(t, t.TempDir(), pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient})
			code, out, errb := runNicoctl(t, "--endpoints", strings.Join(f.Endpoints(), ","), "--tls.caFile", root.CA, "--tls.certFile", root.Cert, "--tls.keyFile", root.Key, "status", "-o", "json")
			var v struct {
				Voters        int  `json:"voters"`
				HealthyVoters int  `json:"healthyVoters"`
				QuorumOK      bool `json:"quorumOK"`
			}
			if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.Voters != 2 || v.HealthyVoters != 2 || !v.QuorumOK {
				t.Fatalf("nicoctl status: exit %d, %v, %+v\n%s%s", code, err, v, out, errb)
			}

			// Two voters, one of them external: a node's join needs both
			// healthy, so it goes on only if ext-1 counts for quorum.
			f.Start(f.AgentConfig("cp-2", false))
			f.WaitVoters(90*time.Second, "cp-1", "cp-2", "ext-1")

			// It leads when it leaves the spec: leadership moves first.
			moveLeaderTo(t, f, peer)
			c := f.Coord("c-1")
			for len(c.Steps) > 0 {
				<-c.Steps
			}
			setExternalMembers(t, st)
			f.WaitVoters(60*time.Second, "cp-1", "cp-2")
			var actions []string
			for len(c.Steps) > 0 {
				if s := <-c.Steps; s.Action != membership.Wait {
					actions = append(actions, string(s.Action))
				}
			}
			if got := strings.Join(actions, ","); !strings.Contains(got, "StartRemove,TransferLeader,RemoveMember") {
				t.Fatalf("steps of the off-boarding %s, want the leadership moved before the removal", got)
			}
			select {
			case <-proc.exited:
				t.Logf("ext-1 exited once removed: %v", proc.err)
			case <-time.After(30 * time.Second):
				t.Fatal("the removed external etcd did not exit within 30s")
			}
			testwait.For(t, 30*time.Second, "ext-1's record dropped", func() (bool, string) {
				// Bounded per read: a cluster with no leader answers a
				// linearizable read only by the client retrying for ever.
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				defer cancel()
				resp, err := st.Client().Get(ctx, store.ExternalMemberKey("ext-1"))
				if err != nil {
					return false, err.Error()
				}
				return len(resp.Kvs) == 0, "recorded"
			})
			for _, key := range []string{store.NodeKey("ext-1"), store.JoinKey("ext-1"), store.RemovalKey("ext-1"), store.HeartbeatKey("ext-1")} {
				if resp, err := st.Client().Get(t.Context(), key, clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
					t.Fatalf("%s for an external member: %v, %v", key, resp, err)
				}
			}
		})
	}
}

// setExternalMembers writes the EtcdCluster's spec.members by
// compare-and-swap, as `nicoctl apply` would, keeping the rest.
func setExternalMembers(t *testing.T, st *store.Store, members ...api.EtcdMemberSpec) {
	t.Helper()
	testwait.For(t, 10*time.Second, "spec.members written", func() (bool, string) {
		ec := new(api.EtcdCluster)
		if err := st.Get(t.Context(), store.EtcdClusterKey, ec); err != nil {
			return false, err.Error()
		}
		ec.Spec.Members = members
		err := st.Update(t.Context(), store.EtcdClusterKey, ec)
		if errors.Is(err, store.ErrConflict) {
			return false, err.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		return true, ""
	})
}

// moveLeaderTo makes the member at peer the etcd leader, through the
// current leader.
func moveLeaderTo(t *testing.T, f *fleet, peer string) {
	t.Helper()
	cli := f.Client()
	defer cli.Close()
	testwait.For(t, 30*time.Second, "leadership at "+peer, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ms, err := cli.MemberList(ctx)
		if err != nil {
			return false, err.Error()
		}
		var to uint64
		var leaderURL string
		for _, m := range ms.Members {
			if slices.Contains(m.PeerURLs, peer) {
				to = m.ID
			}
			if len(m.ClientURLs) > 0 {
				if s, err := cli.Status(ctx, m.ClientURLs[0]); err == nil && s.Leader == m.ID {
					leaderURL = m.ClientURLs[0]
					if m.ID == to || slices.Contains(m.PeerURLs, peer) {
						return true, ""
					}
				}
			}
		}
		if to == 0 || leaderURL == "" {
			return false, "no leader or no member at " + peer
		}
		lc := etcdtest.NewClient(t, leaderURL)
		defer lc.Close()
		if _, err := lc.MoveLeader(ctx, to); err != nil {
			return false, err.Error()
		}
		return false, "moved; checking"
	})
}

// isLearner tells whether the member at peer is a learner.
func isLearner(f *fleet, peer string) (bool, error) {
	cli := f.Client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return false, err
	}
	for _, m := range resp.Members {
		if slices.Contains(m.PeerURLs, peer) {
			return m.IsLearner, nil
		}
	}
	return false, errors.New("no member at " + peer)
}

// externalEtcd is an etcd process the test runs itself.
type externalEtcd struct {
	exited chan struct{}
	err    error
}

// startExternalEtcd runs etcd at bin by hand, as its operator would: with
// the start values nico published and certificates from the fleet's CA.
// It is stopped (SIGTERM, then killed) when the test ends.
func startExternalEtcd(t *testing.T, bin, name, peer, client string, start api.ExternalMemberStart) *externalEtcd {
	t.Helper()
	dir := t.TempDir()
	args := []string{
		"--name=" + name, "--data-dir=" + filepath.Join(dir, "data"),
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--initial-cluster=" + start.InitialCluster, "--initial-cluster-state=" + start.InitialClusterState,
		"--log-outputs=stderr",
	}
	if tls := etcdtest.MemberTLS(t, name, peer, client); tls != nil {
		args = append(args,
			"--trusted-ca-file="+tls.TrustedCAFile, "--cert-file="+tls.ServerCertFile, "--key-file="+tls.ServerKeyFile, "--client-cert-auth",
			"--peer-trusted-ca-file="+tls.TrustedCAFile, "--peer-cert-file="+tls.PeerCertFile, "--peer-key-file="+tls.PeerKeyFile, "--peer-client-cert-auth")
	}
	cmd := exec.Command(bin, args...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting external etcd: %v", err)
	}
	p := &externalEtcd{exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("external etcd's log (last 4 KiB):\n%s", tail(log.Bytes(), 4096))
		}
	})
	return p
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
