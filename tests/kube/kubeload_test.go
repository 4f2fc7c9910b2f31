package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/requests"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/fleetkit"
	"github.com/homystack/nico/tests/kubetest"
)

// TestKubernetesAPIThroughMemberReplacement runs a client-go ConfigMap
// load (kubetest.ConfigMapLoad, 20 writes a second and a watch) through
// the published kubeconfig of a cluster on nico's etcd while nico
// replaces the etcd member of control-plane machine cp-3: its member is
// removed (a standby removal, as nicoctl's) and the machine joins again
// as a new member, three voters again. No write may fail after the
// client's retries and the watch must deliver every write's
// resourceVersion; the row (failed requests, longest time without a
// successful write, relists) is logged.
func TestKubernetesAPIThroughMemberReplacement(t *testing.T) {
	f, ctx := newLoadFleet(t)
	kubeconfig := f.loadCluster(t, ctx, "1.37.2")
	f.underLoad(t, ctx, kubeconfig, "(a) replace an etcd member", func() {
		old := f.memberID(t, ctx, "cp-3")
		if _, err := requests.RequestStandby(ctx, f.st, "cp-3", "kubeload test"); err != nil {
			t.Fatal(err)
		}
		f.restartStandby(t, "cp-3")
		testwait.For(t, 2*time.Minute, "cp-3 a voter again as a new member", func() (bool, string) {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			ms, err := f.root.MemberList(cctx)
			if err != nil {
				return false, err.Error()
			}
			voters := 0
			var now uint64
			for _, m := range ms.Members {
				if !m.IsLearner {
					voters++
				}
				if m.Name == "cp-3" && !m.IsLearner {
					now = m.ID
				}
			}
			return voters == 3 && now != 0 && now != old, fmt.Sprintf("%d voters, cp-3's voter %x (was %x)", voters, now, old)
		})
	})
}

// TestKubernetesAPIThroughControlPlaneRoll is
// TestKubernetesAPIThroughMemberReplacement through a version change
// (1.37.1 to 1.37.2) that rolls the three control-plane machines one at a
// time, each API server restarted.
func TestKubernetesAPIThroughControlPlaneRoll(t *testing.T) {
	f, ctx := newLoadFleet(t)
	kubeconfig := f.loadCluster(t, ctx, "1.37.1")
	f.underLoad(t, ctx, kubeconfig, "(c) roll the control-plane machines", func() {
		mark := time.Now()
		f.applyCluster(t, ctx, "1.37.2")
		f.waitCluster(t, ctx, "k1", 6*time.Minute, "Ready at 1.37.2", func(kc *api.KubernetesCluster) bool {
			return kc.Status.Phase == api.ClusterReady && kc.Status.Version == "1.37.2"
		})
		f.checkControlPlaneFirst(t, mark, "1.37.2")
	})
}

// TestKubernetesAPIThroughEtcdPatchRoll is
// TestKubernetesAPIThroughMemberReplacement through an etcd patch
// version roll: the control-plane machines' members run etcd's binaries
// (the exec runtime, given both), 3.6.15 to start with; spec.version
// 3.6.16 restarts each member on the new binary, one at a time.
func TestKubernetesAPIThroughEtcdPatchRoll(t *testing.T) {
	const from, to = "3.6.15", "3.6.16"
	paths := map[string]string{}
	for _, b := range etcdtest.Binaries(t) {
		paths[b.Version] = b.Path
	}
	if paths[from] == "" || paths[to] == "" {
		msg := fmt.Sprintf("needs etcd %s and %s binaries in %s (make e2e-kube builds them), have %v", from, to, etcdtest.EnvBinaries, paths)
		if os.Getenv(kubetest.EnvRequireBinaries) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	byVersion, err := member.BinariesByVersion(t.Context(), []string{paths[from], paths[to]})
	if err != nil {
		t.Fatal(err)
	}
	f, ctx := newLoadFleetWith(t, func() member.Runtime {
		return fleetkit.ExecRuntime(paths[from], member.WithBinaries(byVersion), member.WithBinaryVersion(from))
	})
	kubeconfig := f.loadCluster(t, ctx, "1.37.2")
	f.waitEtcdVersions(t, ctx, from)
	f.underLoad(t, ctx, kubeconfig, "(b) roll an etcd patch version", func() {
		f.setEtcdVersion(t, ctx, to)
		f.waitEtcdVersions(t, ctx, to)
	})
}

// loadFleet is a fleet of three control-plane machines and one data-plane
// machine, with nicoctl.
type loadFleet struct {
	*fleet
	ctl func(context.Context, ...string) (string, error)
}

func newLoadFleet(t *testing.T) (*loadFleet, context.Context) {
	return newLoadFleetWith(t, nil)
}

// newLoadFleetWith is newLoadFleet with the control-plane members'
// runtime (nil: embedded etcd).
func newLoadFleetWith(t *testing.T, runtime func() member.Runtime) (*loadFleet, context.Context) {
	kubetest.FindBinaries(t) // skips (or fails) before the nicoctl build
	nicoctl := nicoctlBin(t)
	f := newFleet(t, fleetOptions{cps: 3, dps: 1, clusters: true, runtime: runtime})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	t.Cleanup(cancel)
	return &loadFleet{fleet: f, ctl: f.nicoctl(nicoctl)}, ctx
}

// applyCluster applies cluster k1 at version with nicoctl.
func (f *loadFleet) applyCluster(t *testing.T, ctx context.Context, version string) {
	t.Helper()
	file := filepath.Join(f.dir, "k1.yaml")
	writeFile(t, file, clusterDoc("k1", version, "dp-1", ""))
	if out, err := f.ctl(ctx, "apply", "-f", file); err != nil {
		t.Fatalf("nicoctl apply %s: %v\n%s", version, err, out)
	}
}

// loadCluster applies cluster k1 at version, waits for it Ready and
// returns the path of its published kubeconfig.
func (f *loadFleet) loadCluster(t *testing.T, ctx context.Context, version string) string {
	t.Helper()
	f.applyCluster(t, ctx, version)
	f.waitCluster(t, ctx, "k1", 6*time.Minute, "Ready", func(kc *api.KubernetesCluster) bool {
		return kc.Status.Phase == api.ClusterReady && kc.Status.Version == version
	})
	kubeconfig := filepath.Join(f.dir, "k1.kubeconfig")
	if out, err := f.ctl(ctx, "get", "kubeconfig", "k1", "--file", kubeconfig); err != nil {
		t.Fatalf("nicoctl get kubeconfig: %v\n%s", err, out)
	}
	return kubeconfig
}

// underLoad runs op under a ConfigMap load (20 writes a second) through
// kubeconfig, 40 writes before and after it, logs the load's row as
// operation and fails on a failed write or a missed event.
func (f *loadFleet) underLoad(t *testing.T, ctx context.Context, kubeconfig, operation string, op func()) {
	t.Helper()
	run, err := kubetest.ConfigMapLoad{Kubeconfig: kubeconfig, Rate: 20}.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.waitWrites(t, run, 40, "before "+operation)
	op()
	f.waitWrites(t, run, run.Writes()+40, "after "+operation)
	rep, err := run.Stop(30 * time.Second)
	t.Logf("ConfigMap load through %s:\n%s\n%s", operation, kubetest.RowHeader, rep.Row(operation))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed != 0 {
		t.Errorf("%d writes failed after the client's retries, want 0", rep.Failed)
	}
	if rep.Missed != 0 {
		t.Errorf("the watch missed %d of %d writes' resourceVersions (%d relists), want none", rep.Missed, rep.Writes, rep.Relists)
	}
}

// waitWrites waits until the load's writes reach n.
func (f *loadFleet) waitWrites(t *testing.T, run *kubetest.LoadRun, n int, what string) {
	t.Helper()
	testwait.For(t, 2*time.Minute, fmt.Sprintf("%d ConfigMap writes %s", n, what), func() (bool, string) {
		return run.Writes() >= n, fmt.Sprintf("%d writes", run.Writes())
	})
}

// memberID is the etcd member ID of machine name.
func (f *fleet) memberID(t *testing.T, ctx context.Context, name string) uint64 {
	t.Helper()
	ms, err := f.root.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms.Members {
		if m.Name == name {
			return m.ID
		}
	}
	t.Fatalf("%s has no member among %d", name, len(ms.Members))
	return 0
}

// restartStandby waits for machine name's agent to stop as a standby
// (agent.ErrStandby, its member removed and wiped) and starts it again
// with the same configuration and machine, as systemd does: it files a
// new join request. The machine's control plane runs on meanwhile.
func (f *fleet) restartStandby(t *testing.T, name string) {
	t.Helper()
	f.mu.Lock()
	n := f.nodes[name]
	f.mu.Unlock()
	select {
	case err := <-n.done:
		if !errors.Is(err, agent.ErrStandby) {
			t.Fatalf("%s's agent returned %v, want ErrStandby", name, err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s's agent did not stop as a standby", name)
	}
	n.done <- nil
	select {
	case <-n.rt.Done():
	case <-time.After(time.Minute):
		t.Fatalf("%s's member did not stop", name)
	}
	rt := member.NewEmbedded(member.WithTimings(50*time.Millisecond, 500*time.Millisecond))
	cfg := n.cfg
	cfg.Endpoints = f.endpoints()
	next := &node{host: n.host, cfg: cfg, rt: rt, done: make(chan error, 1)}
	ag := agent.New(cfg, rt, nopNotifier{}, f.log.With("node", name))
	ctx, cancel := context.WithCancel(context.Background())
	next.cancel = cancel
	f.mu.Lock()
	f.nodes[name] = next
	f.mu.Unlock()
	go func() { next.done <- ag.Run(ctx) }()
}

// setEtcdVersion sets the EtcdCluster's spec.version, retrying on a
// concurrent write.
func (f *fleet) setEtcdVersion(t *testing.T, ctx context.Context, v string) {
	t.Helper()
	testwait.For(t, 30*time.Second, "spec.version "+v+" written", func() (bool, string) {
		ec := &api.EtcdCluster{}
		if err := f.st.Get(ctx, store.EtcdClusterKey, ec); err != nil {
			return false, err.Error()
		}
		ec.Spec.Version = v
		if err := f.st.Update(ctx, store.EtcdClusterKey, ec); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// waitEtcdVersions waits until every control-plane machine reports its
// member on etcd v, the member's own status says so, and no membership or
// version step holds the slot.
func (f *fleet) waitEtcdVersions(t *testing.T, ctx context.Context, v string) {
	t.Helper()
	testwait.For(t, 4*time.Minute, "every member on etcd "+v+" and the slot free", func() (bool, string) {
		var off []string
		for _, name := range f.nodeNames() {
			if !strings.HasPrefix(name, "cp-") {
				continue
			}
			n := &api.Node{}
			if err := f.st.Get(ctx, store.NodeKey(name), n); err != nil {
				return false, err.Error()
			}
			if n.Status.EtcdVersion != v {
				off = append(off, fmt.Sprintf("%s=%q %s", name, n.Status.EtcdVersion, n.Status.EtcdVersionError))
				continue
			}
			// The member itself says which server answers.
			f.mu.Lock()
			url := f.nodes[name].cfg.ClientURL
			f.mu.Unlock()
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := f.root.Status(sctx, url)
			cancel()
			if err != nil || st.Version != v {
				off = append(off, fmt.Sprintf("%s's member answers %v %v", name, st, err))
			}
		}
		if len(off) > 0 {
			return false, strings.Join(off, ", ")
		}
		if kv, err := f.st.GetKV(ctx, store.ActiveOpKey); !errors.Is(err, store.ErrNotFound) {
			return false, fmt.Sprintf("slot held: %v %v", kv, err)
		}
		return true, ""
	})
}
