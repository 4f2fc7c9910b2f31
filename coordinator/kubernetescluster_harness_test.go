package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/rollout"
	"github.com/homystack/nico/pkg/snapshot"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// kcHarness drives the cluster and rollout controllers of one leader
// pass by pass against real etcd, and plays the machines' agents: they
// apply every configuration at once and report their components.
type kcHarness struct {
	t  *testing.T
	cl *etcdtest.Cluster
	st *store.Store
	// nodeCA, when set, issues each machine's node certificate.
	nodeCA  *pki.CA
	c       *Coordinator
	cc      *clusterController
	ro      *rollouter
	now     time.Time
	secrets *fakeSecrets
	// snapStore, when set, is the leader's snapshot destination
	// (Config.SnapshotStores); nil: snapshot.Open.
	snapStore func(dest string) (snapshot.Store, error)
	// unhealthy components per machine ("cp-1/kube-scheduler").
	unhealthy map[string]bool
	// probing: which components the agents report (none until set).
	probing []string
	// hold: machines whose agents do not apply yet.
	hold map[string]bool
	// silent: the agents write no component report.
	silent bool
	// drain, when set, plays the runner's agent for each drain request
	// it has not answered: it returns the attempt's status (phase, exit
	// code, output); nil: requests stay unanswered.
	drain func(req *api.DrainRequest) api.DrainRequestStatus
	// onApply, when set, sees each configuration before its agent applies it.
	onApply func(cfg *api.NixosConfiguration)
}

// testClusterController is the Kubernetes cluster controller c would run
// in the term fenced on fence (controllers.go).
func testClusterController(c *Coordinator, fence store.Fence) *clusterController {
	return newClusterController(c.leaderDeps(fence), &c.cfg.Clusters, c.snapshotter(c.leaderDeps(fence)))
}

// testRollouter is the rollout controller c would run in the term fenced
// on fence (controllers.go).
func testRollouter(c *Coordinator, fence store.Fence) *rollouter {
	return newRollouter(c.leaderDeps(fence), c.cfg.Policy, &c.cfg.Clusters, c.snapshotter(c.leaderDeps(fence)))
}

func newKCHarness(t *testing.T) *kcHarness {
	t.Helper()
	cl := etcdtest.Start(t, 1)
	st := dialStore(t, cl)
	h := &kcHarness{t: t, cl: cl, st: st, now: time.Unix(1_700_000_000, 0).UTC(), secrets: &fakeSecrets{}, unhealthy: map[string]bool{}, hold: map[string]bool{}}
	c, fence := leaderTerm(t, st, "leader", withClock(clockAt(&h.now)), func(cfg *Config) {
		cfg.SnapshotStores, cfg.SnapshotTempDir = h.openSnapshots, t.TempDir()
		cfg.Clusters = ClusterHooks{DefaultGitRepo: "https://git.example/fleet", Secrets: h.secrets}
	})
	h.c = c
	h.cc, h.ro = testClusterController(c, fence), testRollouter(c, fence)
	return h
}

// openSnapshots is the leader's Config.SnapshotStores.
func (h *kcHarness) openSnapshots(dest string) (snapshot.Store, error) {
	if h.snapStore != nil {
		return h.snapStore(dest)
	}
	return snapshot.Open(dest, nil)
}

// machine registers a live worker node with labels (k=v pairs).
func (h *kcHarness) machine(name string, labels ...string) {
	h.t.Helper()
	ctx := h.t.Context()
	n := api.NewNode(name)
	n.Spec.Roles = []api.Role{api.RoleWorker}
	n.Spec.Labels = map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		n.Spec.Labels[labels[i]] = labels[i+1]
	}
	n.Status.Phase = api.NodeRegistered
	n.Status.GossipAddr = fmt.Sprintf("127.0.0.%d:7946", 10+len(h.nodes()))
	if h.nodeCA != nil {
		crt, _, err := h.nodeCA.Issue(pki.Request{CommonName: "node:" + name, Usage: pki.UsageClient}, h.now)
		if err != nil {
			h.t.Fatal(err)
		}
		n.Status.Certificate = string(crt)
	}
	if err := h.st.PutObject(ctx, n); err != nil {
		h.t.Fatal(err)
	}
	lease, err := h.st.Client().Grant(ctx, 600)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.st.PutHeartbeat(ctx, name, h.now, lease.ID); err != nil {
		h.t.Fatal(err)
	}
}

func (h *kcHarness) nodes() []string {
	names, err := h.st.Names(h.t.Context(), store.NodesDir)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for n := range names {
		out = append(out, n)
	}
	return out
}

// pass advances the clock, runs one cluster pass and the rollout
// controller until it waits, and lets the agents apply and report.
func (h *kcHarness) pass() {
	h.t.Helper()
	h.now = h.now.Add(time.Second)
	if err := h.cc.reconcile(h.t.Context()); err != nil {
		h.t.Fatalf("cluster pass: %v", err)
	}
	for range 20 {
		s, err := h.ro.once(h.t.Context())
		if err != nil {
			h.t.Fatalf("rollout step: %v", err)
		}
		if s.Action == rollout.None || s.Action == rollout.Wait {
			break
		}
		h.agents()
		h.report() // the agents probe as soon as they applied
	}
	h.agents()
	h.report()
	h.drains()
}

// drains answers the drain requests with h.drain.
func (h *kcHarness) drains() {
	h.t.Helper()
	if h.drain == nil {
		return
	}
	reqs, _, err := store.List[api.DrainRequest](h.t.Context(), h.st, store.DrainRequestsDir)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, r := range reqs {
		if r.Answered() {
			continue
		}
		r.Status = h.drain(r)
		r.Status.Attempt, r.Status.Runner = r.Spec.Attempt, r.Spec.Runner
		if r.Status.FinishedAt.IsZero() && r.Status.Phase != api.DrainRunning {
			r.Status.FinishedAt = h.now
		}
		if err := h.st.UpdateObject(h.t.Context(), r); err != nil {
			h.t.Fatalf("drain runner %s: %v", r.Spec.Runner, err)
		}
	}
}

// agents apply every configuration that is not settled.
func (h *kcHarness) agents() {
	h.t.Helper()
	for _, cfg := range h.configs() {
		if cfg.Settled() != api.GenerationPending || h.hold[cfg.Metadata.Name] {
			continue
		}
		if h.onApply != nil {
			h.onApply(cfg)
		}
		cfg.Status.Generation, cfg.Status.Attempt, cfg.Status.Phase = cfg.Spec.Generation, cfg.Spec.Attempt, api.GenerationApplied
		cfg.Status.AppliedGeneration = cfg.Spec.Generation
		if err := h.st.UpdateObject(h.t.Context(), cfg); err != nil {
			h.t.Fatalf("agent %s: %v", cfg.Metadata.Name, err)
		}
	}
}

// report writes, for each machine that runs a cluster configuration of a
// control-plane machine, the probes of h.probing.
func (h *kcHarness) report() {
	h.t.Helper()
	if h.silent {
		return
	}
	for _, cfg := range h.configs() {
		if len(cfg.Metadata.OwnerReferences) == 0 || cfg.Status.AppliedGeneration == 0 || !strings.HasPrefix(cfg.Metadata.Name, "cp-") {
			continue
		}
		r := api.NewComponentReport(cfg.Metadata.Name)
		r.Status.Cluster, r.Status.CheckedAt = cfg.Metadata.OwnerReferences[0].Name, h.now
		for _, comp := range h.probing {
			ok := !h.unhealthy[cfg.Metadata.Name+"/"+comp]
			c := api.ComponentHealth{Name: comp, Healthy: ok, HoldsLease: ok && cfg.Metadata.Name == "cp-1" && comp != api.ComponentAPIServer}
			if !ok {
				c.Message = "healthz: 500"
			}
			r.Status.Components = append(r.Status.Components, c)
		}
		if err := h.st.PutObject(h.t.Context(), r); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *kcHarness) configs() []*api.NixosConfiguration {
	h.t.Helper()
	cfgs, _, err := store.List[api.NixosConfiguration](h.t.Context(), h.st, store.NixosConfigsDir)
	if err != nil {
		h.t.Fatal(err)
	}
	return cfgs
}

func (h *kcHarness) config(name string) *api.NixosConfiguration {
	for _, c := range h.configs() {
		if c.Metadata.Name == name {
			return c
		}
	}
	return nil
}

func (h *kcHarness) create(kc *api.KubernetesCluster) {
	h.t.Helper()
	kc.Metadata.CreatedAt = h.now
	if err := h.st.CreateObject(h.t.Context(), kc); err != nil {
		h.t.Fatal(err)
	}
	h.now = h.now.Add(time.Second)
}

// cluster returns the stored cluster, nil when it is gone.
func (h *kcHarness) cluster(name string) *api.KubernetesCluster {
	h.t.Helper()
	kc := &api.KubernetesCluster{}
	if err := h.st.Get(h.t.Context(), store.ClusterKey(name), kc); errors.Is(err, store.ErrNotFound) {
		return nil
	} else if err != nil {
		h.t.Fatal(err)
	}
	return kc
}

func (h *kcHarness) claims() map[string]string {
	h.t.Helper()
	resp, err := h.st.Client().Get(h.t.Context(), store.ClusterClaimsDir, clientv3.WithPrefix())
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[store.Name(string(kv.Key))] = string(kv.Value)
	}
	return out
}

func (h *kcHarness) rollouts() []*api.Rollout {
	h.t.Helper()
	rs, _, err := store.List[api.Rollout](h.t.Context(), h.st, store.RolloutsDir)
	if err != nil {
		h.t.Fatal(err)
	}
	slices.SortFunc(rs, func(a, b *api.Rollout) int { return rolloutSeq(a.Metadata.Name) - rolloutSeq(b.Metadata.Name) })
	return rs
}

// selectorCluster is cluster name over cp machines labelled role=cp and dp
// labelled role=dp.
func selectorCluster(name string, cp, dp int) *api.KubernetesCluster {
	kc := api.NewKubernetesCluster(name)
	kc.Spec.Version = "1.37.2"
	kc.Spec.ControlPlane.MachineSet = api.MachineSet{MachineSelector: &api.MachineSelector{MatchLabels: map[string]string{"role": "cp"}}, Count: cp}
	kc.Spec.DataPlane.MachineSet = api.MachineSet{MachineSelector: &api.MachineSelector{MatchLabels: map[string]string{"role": "dp"}}, Count: dp}
	return kc
}

// fakeSecrets is the memory fake of ClusterSecrets: it records what it
// was asked and hands each machine a CA file.
type fakeSecrets struct {
	mu         sync.Mutex
	ensured    map[string][]string
	kubeconfig map[string]string
	released   []string
	deleted    []string
}

func (s *fakeSecrets) Ensure(_ context.Context, _ store.Fence, c *api.KubernetesCluster, req SecretsRequest) (map[string][]api.HostFile, error) {
	cp, dp := req.ControlPlane, req.DataPlane
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ensured == nil {
		s.ensured = map[string][]string{}
	}
	s.ensured[c.Metadata.Name] = append(slices.Clone(cp), dp...)
	out := map[string][]api.HostFile{}
	for _, m := range append(slices.Clone(cp), dp...) {
		out[m] = []api.HostFile{{Path: "/etc/kubernetes/pki/ca.crt", SecretRef: &api.SecretKeyRef{Name: c.Metadata.Name + "-ca", Key: "tls.crt"}}}
	}
	return out, nil
}

func (s *fakeSecrets) Kubeconfig(_ context.Context, _ store.Fence, c *api.KubernetesCluster, server string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kubeconfig == nil {
		s.kubeconfig = map[string]string{}
	}
	s.kubeconfig[c.Metadata.Name] = server
	return api.KubeconfigSecretName(c.Metadata.Name), nil
}

func (s *fakeSecrets) Released(_ context.Context, _ store.Fence, c *api.KubernetesCluster, machines []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range machines {
		s.released = append(s.released, c.Metadata.Name+"/"+m)
	}
	return nil
}

func (s *fakeSecrets) Delete(_ context.Context, _ store.Fence, c *api.KubernetesCluster) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleted = append(s.deleted, c.Metadata.Name)
	return nil
}

func clientv3WithPrefix() []clientv3.OpOption { return []clientv3.OpOption{clientv3.WithPrefix()} }
