package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeapi"
	"github.com/homystack/nico/pkg/kubeplan"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/kubetest"
)

// TestRealWorkersRollingUpdate: a cluster over three control-plane
// machines (nico's etcd voters, each with its API server, controller-
// manager and scheduler) and three real workers runs a Deployment of three replicas with a
// PodDisruptionBudget (minAvailable 2). A gitRepo change, a
// configurationSubdir change, a credentialsRef change and a machine-list
// change (dp-3 leaves) each roll the cluster: the control-plane machines
// one at a time (the etcd leader last), the workers one at a time: each Node is
// cordoned and drained through the eviction API before its machine
// switches, and uncordoned once Ready after (dp-3 is drained, released,
// its Node deleted). A watcher of the pods and Nodes sees the budget
// never broken (never fewer than two ready pods), never two Nodes
// cordoned at once, every worker cordoned during each roll, and every
// staying Node Ready and schedulable after. Deleting the cluster then
// releases every machine (kubelets stopped) and leaves none of its keys.
func TestRealWorkersRollingUpdate(t *testing.T) {
	kubetest.FindBinaries(t)
	dps := []string{"dp-1", "dp-2", "dp-3"}
	if !kubetest.InNetns(t, "TestRealWorkersRollingUpdate", workerAddrs(dps)...) {
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 9*time.Minute)
	defer cancel()
	f, admin, k := newWorkerCluster(t, ctx, 3, dps)

	for _, change := range []struct {
		what string
		set  func(*api.KubernetesCluster)
		done func(api.NixosConfigurationSpec) bool
	}{
		{"gitRepo", func(kc *api.KubernetesCluster) { kc.Spec.GitRepo = "https://git.example/kube-2" },
			func(s api.NixosConfigurationSpec) bool { return s.GitRepo == "https://git.example/kube-2" }},
		{"configurationSubdir", func(kc *api.KubernetesCluster) { kc.Spec.ConfigurationSubdir = "k8s" },
			func(s api.NixosConfigurationSpec) bool { return s.ConfigurationSubdir == "k8s" }},
		{"credentialsRef", func(kc *api.KubernetesCluster) { kc.Spec.CredentialsRef = "git-credentials" },
			func(s api.NixosConfigurationSpec) bool { return s.CredentialsRef == "git-credentials" }},
		// dp-3 leaves: the others roll (cluster.nix lists the machines),
		// then dp-3 is drained and released.
		{"machine list", func(kc *api.KubernetesCluster) { kc.Spec.DataPlane.Machines = dps[:2] },
			func(s api.NixosConfigurationSpec) bool {
				return !slices.ContainsFunc(s.AdditionalFiles, func(f api.AdditionalFile) bool { return strings.Contains(f.Inline, "dp-3") })
			}},
	} {
		w := watchDisruption(ctx, t, admin, "web", dps)
		t1 := time.Now()
		f.changeCluster(t, ctx, "k1", change.set)
		f.waitRolled(t, ctx, "k1", 3*time.Minute, change.what, change.done)
		seen := w.stop()
		t.Logf("%s change rolled in %s: %s", change.what, time.Since(t1).Round(time.Millisecond), seen)
		if seen.minReady < 2 {
			t.Errorf("%s: %d ready pods at one point, below the budget's minAvailable 2", change.what, seen.minReady)
		}
		if seen.maxCordoned > 1 {
			t.Errorf("%s: %d Nodes cordoned at once", change.what, seen.maxCordoned)
		}
		for _, m := range dps {
			if !seen.cordoned[m] {
				t.Errorf("%s: %s was never seen cordoned", change.what, m)
			}
		}
		staying := dps
		if change.what == "machine list" {
			staying = dps[:2]
			testwait.For(t, time.Minute, "dp-3 unclaimed, its Node deleted", func() (bool, string) {
				nodes, err := admin.Nodes(ctx)
				_, has := nodes["dp-3"]
				return err == nil && !has && f.claim(ctx, "dp-3") == "", fmt.Sprintf("claim %q, Node: %v (%v)", f.claim(ctx, "dp-3"), has, err)
			})
		}
		nodes, err := admin.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range staying {
			if n := nodes[m]; !n.Ready || n.Unschedulable {
				t.Errorf("%s: Node %s after the roll: %+v", change.what, m, n)
			}
		}
	}
	if out, err := k.Run(ctx, nil, "rollout", "status", "deployment/web", "--timeout=1m"); err != nil {
		t.Fatalf("the Deployment after the rolls: %v\n%s", err, out)
	}

	// Deleted: the machines are released (their kubelets and the control
	// plane stopped), the cluster's registry, Nodes included, is gone.
	f.deleteCluster(t, ctx, "k1")
	f.checkDeleted(t, ctx, "k1", "")
	for _, m := range dps {
		if f.machines[m].RunningWorker() != nil {
			t.Errorf("%s still runs its kubelet after the deletion", m)
		}
	}
}

// deleteCluster marks cluster name deleted, as nicoctl delete does, and
// waits until the controller has released its machines and removed it.
func (f *fleet) deleteCluster(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	now := time.Now()
	f.updateCluster(t, ctx, name, func(kc *api.KubernetesCluster) { kc.Metadata.DeletionTimestamp = &now })
	testwait.For(t, 3*time.Minute, name+" deleted", func() (bool, string) {
		kc := api.NewKubernetesCluster(name)
		err := f.st.Get(ctx, store.ClusterKey(name), kc)
		if errors.Is(err, store.ErrNotFound) {
			return true, ""
		}
		ros, _, _ := store.List[api.Rollout](ctx, f.st, store.RolloutsDir)
		var rs []string
		for _, r := range ros {
			rs = append(rs, fmt.Sprintf("%s %s: %s", r.Metadata.Name, r.Status.Phase, r.Status.Message))
		}
		return false, fmt.Sprintf("%v; %s: %s; rollouts: %s", err, kc.Status.Phase, kc.Status.Message, strings.Join(rs, "; "))
	})
}

// workerAddrs are the node addresses of data-plane machines dps, for
// kubetest.InNetns.
func workerAddrs(dps []string) []string {
	var addrs []string
	for _, m := range dps {
		addrs = append(addrs, workerIP(m)+"/24")
	}
	return addrs
}

// workerClusterSpec is cluster k1 over control-plane machines cps and
// data-plane machines dps: etcd provider nico, probes every second, a step
// timeout of three minutes.
func workerClusterSpec(t testing.TB, cps, dps []string) *api.KubernetesCluster {
	t.Helper()
	kc := api.NewKubernetesCluster("k1")
	kc.Spec.GitRepo, kc.Spec.Version = "https://git.example/kube", "1.37.2"
	kc.Spec.ControlPlane.Machines = cps
	kc.Spec.DataPlane.Machines = dps
	kc.Spec.Etcd.Provider = api.EtcdProviderNico
	kc.Spec.Probes.Interval = api.Duration(time.Second)
	kc.Spec.Rollout.StepTimeout = api.Duration(3 * time.Minute)
	if err := kc.Validate(); err != nil {
		t.Fatal(err)
	}
	return kc
}

// newWorkerCluster starts a fleet of cps control-plane machines (cp-1 ...)
// and real workers dps, applies cluster k1 over them (workerClusterSpec), waits
// for it Ready (kubectl get nodes lists every worker Ready) and runs the
// Deployment web of three replicas with a
// PodDisruptionBudget (minAvailable 2), its pods' logs read back. It returns the fleet, a
// client of the cluster's API and kubectl with its admin kubeconfig.
func newWorkerCluster(t testing.TB, ctx context.Context, cps int, dps []string) (*fleet, *kubeapi.Client, kubetest.Kubectl) {
	t.Helper()
	f := newFleet(t, fleetOptions{cps: cps, dps: len(dps), clusters: true, workers: true})
	var cpNames []string
	for i := 1; i <= cps; i++ {
		cpNames = append(cpNames, fmt.Sprintf("cp-%d", i))
	}
	kc := workerClusterSpec(t, cpNames, dps)
	t0 := time.Now()
	if err := f.st.PutObject(ctx, kc); err != nil {
		t.Fatal(err)
	}
	f.waitClusterTB(t, ctx, "k1", 5*time.Minute, func(kc *api.KubernetesCluster) bool { return kc.Status.Phase == api.ClusterReady }, "Ready")
	t.Logf("apply to Ready with %d real workers: %s", len(dps), time.Since(t0).Round(time.Millisecond))

	admin := f.adminClient(t, ctx, "k1")
	k := kubetest.Kubectl{Bin: f.bins.Kubectl, Kubeconfig: f.kubeconfigFile(t, ctx, "k1")}
	// kubectl get nodes with the published kubeconfig: every worker Ready.
	out, err := k.Run(ctx, nil, "get", "nodes", "--no-headers")
	if err != nil {
		t.Fatalf("kubectl get nodes: %v\n%s", err, out)
	}
	ready := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			ready[f[0]] = f[1] == "Ready"
		}
	}
	for _, m := range dps {
		if !ready[m] {
			t.Fatalf("kubectl get nodes: %s not Ready:\n%s", m, out)
		}
	}
	if out, err := k.Run(ctx, []byte(kubetest.WebDeployment("web", 3, 2)), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := k.Run(ctx, nil, "rollout", "status", "deployment/web", "--timeout=2m"); err != nil {
		pods, _ := k.Run(ctx, nil, "get", "pods", "-o", "wide")
		events, _ := k.Run(ctx, nil, "get", "events", "--sort-by=.lastTimestamp")
		t.Fatalf("%v\n%s\npods:\n%s\nevents:\n%s", err, out, pods, events)
	}
	out, err = k.Run(ctx, nil, "logs", "-l", "app=web", "--prefix")
	if err != nil || strings.Count(string(out), "web web-") != 3 {
		t.Fatalf("the pods' logs: %v\n%s", err, out)
	}
	t.Logf("three pods of %s run:\n%s", kubetest.WebImage, strings.TrimSpace(string(out)))
	return f, admin, k
}

// kubeconfigFile writes cluster name's admin kubeconfig into a file of
// the test and returns its path.
func (f *fleet) kubeconfigFile(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	sec := api.NewSecret(api.KubeconfigSecretName(name))
	if err := secrets.New(f.st, f.box).Get(ctx, store.NamedSecretKey(sec.Metadata.Name), sec); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := os.WriteFile(p, sec.Spec.Data[api.KubeconfigSecretKey], 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// changeCluster changes cluster name's spec (a new generation), as an
// apply would.
func (f *fleet) changeCluster(t testing.TB, ctx context.Context, name string, set func(*api.KubernetesCluster)) {
	t.Helper()
	f.updateCluster(t, ctx, name, func(kc *api.KubernetesCluster) {
		set(kc)
		kc.Metadata.Generation++
		if err := kc.Validate(); err != nil {
			t.Fatal(err)
		}
	})
}

// updateCluster reads cluster name, changes it with set and writes it
// back, reading it again when the controller's status write came in
// between (store.ErrConflict), as a client of an optimistic store does.
func (f *fleet) updateCluster(t testing.TB, ctx context.Context, name string, set func(*api.KubernetesCluster)) {
	t.Helper()
	testwait.For(t, time.Minute, "cluster "+name+" updated", func() (bool, string) {
		kc := api.NewKubernetesCluster(name)
		if err := f.st.Get(ctx, store.ClusterKey(name), kc); err != nil {
			t.Fatal(err)
		}
		set(kc)
		err := f.st.UpdateObject(ctx, kc)
		if errors.Is(err, store.ErrConflict) {
			return false, err.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		return true, ""
	})
}

// waitRolled waits until every machine of cluster name runs a
// configuration done says is the new one, no rollout of the cluster is
// running (one halted before the change may stay) and the cluster is Ready (read on each try: the cluster's
// own object may not change when its roll ends).
func (f *fleet) waitRolled(t testing.TB, ctx context.Context, name string, within time.Duration, what string, done func(api.NixosConfigurationSpec) bool) {
	t.Helper()
	testwait.For(t, within, what+" rolled", func() (bool, string) {
		kc := api.NewKubernetesCluster(name)
		if err := f.st.Get(ctx, store.ClusterKey(name), kc); err != nil {
			return false, err.Error()
		}
		if kc.Status.Phase != api.ClusterReady {
			return false, fmt.Sprintf("phase %s: %s", kc.Status.Phase, kc.Status.Message)
		}
		cfgs, _, err := store.List[api.NixosConfiguration](ctx, f.st, store.NixosConfigsDir)
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, c := range cfgs {
			if !kubeplan.OwnedBy(c.Metadata.OwnerReferences, name) {
				continue
			}
			if !done(c.Spec) || c.Status.AppliedGeneration != c.Spec.Generation {
				return false, c.Metadata.Name + " has not applied the change"
			}
			n++
		}
		ros, _, err := store.List[api.Rollout](ctx, f.st, store.RolloutsDir)
		if err != nil {
			return false, err.Error()
		}
		if i := slices.IndexFunc(ros, func(r *api.Rollout) bool {
			// A halted rollout stays; the change after it rolls anew.
			return strings.HasPrefix(r.Metadata.Name, name+"-") && !r.Status.Phase.Finished() && r.Status.Phase != api.RolloutHalted
		}); i >= 0 {
			return false, fmt.Sprintf("rollout %s is %s: %s", ros[i].Metadata.Name, ros[i].Status.Phase, ros[i].Status.Message)
		}
		return n == len(kc.Status.ControlPlane.Machines)+len(kc.Status.DataPlane.Machines), fmt.Sprintf("%d configurations", n)
	})
}

// waitHalted waits until a Rollout that match accepts has halted and
// returns it; the wait's message lists the rollouts seen meanwhile.
func (f *fleet) waitHalted(t testing.TB, ctx context.Context, within time.Duration, match func(*api.Rollout) bool) *api.Rollout {
	t.Helper()
	var halted *api.Rollout
	testwait.For(t, within, "the rollout halted", func() (bool, string) {
		ros, _, err := store.List[api.Rollout](ctx, f.st, store.RolloutsDir)
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, r := range ros {
			if match(r) && r.Status.Phase == api.RolloutHalted {
				halted = r
				return true, ""
			}
			seen = append(seen, fmt.Sprintf("%s %s: %s", r.Metadata.Name, r.Status.Phase, r.Status.Message))
		}
		return false, strings.Join(seen, "; ")
	})
	return halted
}

// disruption is what a watcher of a Deployment's pods and the workers'
// Nodes saw.
type disruption struct {
	samples     int
	minReady    int
	maxCordoned int
	cordoned    map[string]bool
	unread      int // samples the API server did not answer
}

func (d disruption) String() string {
	var c []string
	for n := range d.cordoned {
		c = append(c, n)
	}
	slices.Sort(c)
	return fmt.Sprintf("%d samples (%d unanswered), at least %d ready pods, at most %d Nodes cordoned at once, cordoned %v", d.samples, d.unread, d.minReady, d.maxCordoned, c)
}

type watcher struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	d      disruption
}

func (w *watcher) stop() disruption {
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.d
}

// watchDisruption samples, until stopped, the ready pods labelled
// app=<app> (Ready and not being deleted: what a PodDisruptionBudget
// counts) and which of nodes are cordoned.
func watchDisruption(ctx context.Context, t *testing.T, c *kubeapi.Client, app string, nodes []string) *watcher {
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{cancel: cancel, d: disruption{minReady: 1 << 30, cordoned: map[string]bool{}}}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			var l struct {
				Items []struct {
					Metadata struct {
						DeletionTimestamp *time.Time `json:"deletionTimestamp"`
					} `json:"metadata"`
					Status struct {
						Conditions []struct{ Type, Status string } `json:"conditions"`
					} `json:"status"`
				} `json:"items"`
			}
			err := c.Get(ctx, "/api/v1/namespaces/default/pods?labelSelector=app%3D"+app, &l)
			ns, nerr := c.Nodes(ctx)
			if ctx.Err() != nil {
				return
			}
			w.mu.Lock()
			if err != nil || nerr != nil {
				// The API server restarts when cluster.nix changes (one
				// control-plane machine here): counted, logged once.
				if w.d.unread == 0 {
					t.Logf("watcher: pods: %v; nodes: %v", err, nerr)
				}
				w.d.unread++
			} else {
				ready := 0
				for _, p := range l.Items {
					for _, cond := range p.Status.Conditions {
						if cond.Type == "Ready" && cond.Status == "True" && p.Metadata.DeletionTimestamp == nil {
							ready++
						}
					}
				}
				cordoned := 0
				for _, n := range nodes {
					if ns[n].Unschedulable {
						cordoned++
						w.d.cordoned[n] = true
					}
				}
				w.d.samples++
				w.d.minReady, w.d.maxCordoned = min(w.d.minReady, ready), max(w.d.maxCordoned, cordoned)
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond): // the pause between two samples
			}
		}
	}()
	return w
}
