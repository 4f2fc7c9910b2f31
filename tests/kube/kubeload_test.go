package kube

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/requests"
	"github.com/homystack/nico/pkg/testwait"
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
	kubetest.FindBinaries(t) // skips (or fails) before the nicoctl build
	nicoctl := nicoctlBin(t)
	f := newFleet(t, fleetOptions{cps: 3, dps: 1, clusters: true})
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	const name = "k1"
	ctl := f.nicoctl(nicoctl)
	file := filepath.Join(f.dir, "k1.yaml")
	writeFile(t, file, clusterDoc(name, "1.37.2", "dp-1", ""))
	if out, err := ctl(ctx, "apply", "-f", file); err != nil {
		t.Fatalf("nicoctl apply: %v\n%s", err, out)
	}
	f.waitCluster(t, ctx, name, 6*time.Minute, "Ready", func(kc *api.KubernetesCluster) bool { return kc.Status.Phase == api.ClusterReady })
	kubeconfig := filepath.Join(f.dir, "k1.kubeconfig")
	if out, err := ctl(ctx, "get", "kubeconfig", name, "--file", kubeconfig); err != nil {
		t.Fatalf("nicoctl get kubeconfig: %v\n%s", err, out)
	}

	run, err := kubetest.ConfigMapLoad{Kubeconfig: kubeconfig, Rate: 20}.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.waitWrites(t, run, 40, "before the replacement")
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
	f.waitWrites(t, run, run.Writes()+40, "after the replacement")
	rep, err := run.Stop(30 * time.Second)
	t.Logf("ConfigMap load through an etcd member's replacement:\n%s\n%s", kubetest.RowHeader, rep.Row("(a) replace an etcd member"))
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
func (f *fleet) waitWrites(t *testing.T, run *kubetest.LoadRun, n int, what string) {
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
