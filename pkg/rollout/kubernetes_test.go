package rollout

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// kubeSim is a sim whose data-plane nodes are Kubernetes workers, each
// running one pod: the executor cordons, evicts (a pod terminates over one
// pass; blocked nodes' evictions are refused), and a switched worker's
// Node is NotReady for one pass, then Ready with a fresh heartbeat.
type kubeSim struct {
	*sim
	blocked  map[string]bool
	notReady map[string]int
	// stopped: workers whose switch stops the kubelet: the Node stays
	// Ready as it last reported, its heartbeat from before the switch.
	stopped map[string]bool
	// apiDown: control-plane machines whose API server is not ready
	// after their switch.
	apiDown map[string]bool
}

func newKubeSim(cp, dp int) *kubeSim {
	k := &kubeSim{sim: newSim(cp, dp, "cp-1"), blocked: map[string]bool{}, notReady: map[string]int{}, stopped: map[string]bool{}, apiDown: map[string]bool{}}
	k.obs.Rollout.Metadata.Name = "k1-1"
	k.obs.Rollout.Spec.Kubernetes = &api.RolloutKubernetes{Cluster: "k1"}
	for i := range k.obs.Nodes {
		n := &k.obs.Nodes[i]
		if n.ControlPlane {
			continue
		}
		k.obs.Rollout.Spec.Kubernetes.Workers = append(k.obs.Rollout.Spec.Kubernetes.Workers, n.Name)
		pod := "default/web-" + n.Name
		n.Kube = &KubeNode{Registered: true, Ready: true, Pods: []string{pod}, Evict: []string{pod}, Heartbeat: k.now}
	}
	return k
}

// withControlPlaneKubelets makes every control-plane machine an API
// server machine that runs a kubelet with one pod on its Node.
func (k *kubeSim) withControlPlaneKubelets() {
	k.obs.Rollout.Spec.Kubernetes.ControlPlane = nil
	for i := range k.obs.Nodes {
		n := &k.obs.Nodes[i]
		if !n.ControlPlane {
			continue
		}
		k.obs.Rollout.Spec.Kubernetes.ControlPlane = append(k.obs.Rollout.Spec.Kubernetes.ControlPlane, n.Name)
		pod := "kube-system/agent-" + n.Name
		n.Kube = &KubeNode{Registered: true, Ready: true, Pods: []string{pod}, Evict: []string{pod}, Heartbeat: k.now}
	}
}

// leaderTo is a hook that moves etcd's leadership to the node named.
func leaderTo(name string) func(*sim) {
	return func(s *sim) {
		for i := range s.obs.Nodes {
			s.obs.Nodes[i].Leader = s.obs.Nodes[i].Name == name
		}
	}
}

// run is sim.run with the executor's and the kubelets' part played.
func (k *kubeSim) run(t *testing.T, max int) string {
	k.sim.before = func(step Step) {
		for _, name := range Uncordons(k.obs.Rollout, step) {
			k.node(name).Kube.Unschedulable = false
		}
	}
	k.sim.after = func(step Step) {
		r := k.obs.Rollout
		for name, left := range k.notReady {
			if left == 0 {
				k.node(name).Kube.Ready, k.node(name).Kube.NotReady, k.node(name).Kube.Heartbeat = true, "", k.now
				delete(k.notReady, name)
			} else {
				k.notReady[name] = left - 1
			}
		}
		for _, name := range step.Nodes {
			n, p := k.node(name), r.Node(name)
			if step.Action == Start && r.Spec.IsAPIServer(name) {
				n.APIServer = &APIServerReport{Ready: !k.apiDown[name], CheckedAt: k.now}
				if k.apiDown[name] {
					n.APIServer.Message = "readyz: 500: [-]etcd failed"
				}
			}
			if n.Kube == nil {
				continue
			}
			switch step.Action {
			case Drain:
				if p.Cordoned {
					n.Kube.Unschedulable = true
				}
				switch {
				case k.blocked[name]:
					n.Kube.Refused = "Cannot evict pod as it would violate the pod's disruption budget."
				case len(n.Kube.Evict) > 0:
					n.Kube.Evict = nil // terminating
				default:
					n.Kube.Pods = nil // gone
				}
			case Start:
				if k.stopped[name] {
					continue
				}
				n.Kube.Registered = true // a joining machine's kubelet registers its Node
				n.Kube.Ready, n.Kube.NotReady = false, "KubeletNotReady: the kubelet restarts"
				k.notReady[name] = 1
			}
		}
	}
	return k.sim.run(t, max)
}

func TestPlanKubernetesGolden(t *testing.T) {
	cases := map[string]func() *kubeSim{
		// dp-2 was cordoned by its operator: drained, but left cordoned.
		"kube-workers-drain-and-uncordon": func() *kubeSim {
			k := newKubeSim(1, 3)
			k.node("dp-2").Kube.Unschedulable = true
			return k
		},
		// dp-1's switch stops its kubelet: its Node stays Ready as last
		// reported, but no heartbeat comes after the switch, so it is
		// not done; the rollout halts at the step timeout and dp-2 is
		// never drained.
		"kube-kubelet-stopped-halts": func() *kubeSim {
			k := newKubeSim(1, 2)
			k.obs.Rollout.Spec.StepTimeout = api.Duration(3 * time.Minute)
			k.stopped["dp-1"] = true
			return k
		},
		// dp-1 carries a cordon of nico's (a rollout halted after its
		// switch); dp-2 one of its operator's: dp-1's is taken over and
		// lifted after, dp-2's stays.
		"kube-takes-over-its-cordon": func() *kubeSim {
			k := newKubeSim(0, 2)
			k.node("dp-1").Kube.Unschedulable, k.node("dp-1").Kube.NicoCordon = true, true
			k.node("dp-2").Kube.Unschedulable = true
			return k
		},
		"kube-drain-blocked-halts": func() *kubeSim {
			k := newKubeSim(1, 2)
			k.obs.Rollout.Spec.StepTimeout = api.Duration(3 * time.Minute)
			k.blocked["dp-1"] = true
			return k
		},
		"kube-undo-while-draining": func() *kubeSim {
			k := newKubeSim(1, 2)
			k.blocked["dp-1"] = true
			k.hooks[3] = func(s *sim) { s.obs.Rollout.Spec.Undo = true }
			return k
		},
		"kube-api-down-waits": func() *kubeSim {
			k := newKubeSim(0, 1)
			k.hooks[1] = func(s *sim) { s.obs.KubeError = "dial tcp 10.0.0.1:6443: connection refused" }
			k.hooks[3] = func(s *sim) { s.obs.KubeError = "" }
			return k
		},
		// Each control-plane machine is done once its API server reports
		// ready after its switch; cp-3's is not: the rollout halts on it
		// and the etcd leader (cp-1) is never rolled.
		"kube-control-plane-readyz-halts": func() *kubeSim {
			k := newKubeSim(3, 0)
			k.obs.Rollout.Spec.StepTimeout = api.Duration(3 * time.Minute)
			k.obs.Rollout.Spec.Kubernetes.ControlPlane = []string{"cp-1", "cp-2", "cp-3"}
			k.apiDown["cp-3"] = true
			return k
		},
		"kube-control-plane-readyz": func() *kubeSim {
			k := newKubeSim(3, 1)
			k.obs.Rollout.Spec.Kubernetes.ControlPlane = []string{"cp-1", "cp-2", "cp-3"}
			k.obs.Rollout.Spec.ControlPlaneFirst = true
			return k
		},
		// Control-plane machines that run a kubelet (their Node is
		// registered) roll one at a time as Kubernetes nodes: drained,
		// switched, done once API server and Node are Ready again,
		// uncordoned; the etcd leader still last.
		"kube-control-plane-kubelets": func() *kubeSim {
			k := newKubeSim(3, 1)
			k.withControlPlaneKubelets()
			return k
		},
		// Leadership moves to cp-2 while it drains: it is handed on to a
		// healthy voter before cp-2 switches.
		"kube-control-plane-leader-moves-while-draining": func() *kubeSim {
			k := newKubeSim(3, 0)
			k.withControlPlaneKubelets()
			k.hooks[2] = leaderTo("cp-2")
			return k
		},
		// etcd turns unhealthy once cp-2 is drained: it waits, drained
		// and cordoned, and switches once etcd is healthy again.
		"kube-control-plane-drained-waits-for-etcd": func() *kubeSim {
			k := newKubeSim(3, 0)
			k.withControlPlaneKubelets()
			k.hooks[2] = func(s *sim) { s.obs.ClusterHealthy, s.obs.ClusterReason = false, "cp-3 does not answer" }
			k.hooks[4] = func(s *sim) { s.obs.ClusterHealthy, s.obs.ClusterReason = true, "" }
			return k
		},
		// The cluster's API does not answer: control-plane machines roll
		// undrained (a rollout that repairs the API servers must not wait
		// on them).
		"kube-control-plane-api-down-rolls-undrained": func() *kubeSim {
			k := newKubeSim(2, 0)
			k.obs.Rollout.Spec.Kubernetes.ControlPlane = []string{"cp-1", "cp-2"}
			k.obs.KubeError = "dial tcp 10.0.0.1:6443: connection refused"
			return k
		},
		// API servers' machines that are no etcd members roll with the
		// data plane but alone, drained (they run kubelets); the workers
		// after them two at a time.
		"kube-api-servers-not-members-one-at-a-time": func() *kubeSim {
			k := newKubeSim(0, 4)
			k.obs.Rollout.Spec.MaxUnavailable = "2"
			k.obs.Rollout.Spec.Kubernetes.ControlPlane = []string{"dp-1", "dp-2"}
			k.obs.Rollout.Spec.Kubernetes.Workers = []string{"dp-3", "dp-4"}
			return k
		},
		// dp-1..3 are joining (no Node yet): they run nothing, so they
		// roll in one batch beside dp-4, the one worker that counts
		// against maxUnavailable 1; dp-5 after.
		"kube-joining-workers-one-batch": func() *kubeSim {
			k := newKubeSim(0, 5)
			for _, m := range []string{"dp-1", "dp-2", "dp-3"} {
				k.node(m).Kube = &KubeNode{}
			}
			return k
		},
		// Workers leaving the cluster: drained, switched to their
		// release, neither awaited Ready nor uncordoned.
		"kube-leaving": func() *kubeSim {
			k := newKubeSim(0, 2)
			k.obs.Rollout.Spec.Kubernetes.Leaving, k.obs.Rollout.Spec.Kubernetes.Workers = k.obs.Rollout.Spec.Kubernetes.Workers, nil
			return k
		},
		"kube-max-unavailable-2": func() *kubeSim {
			k := newKubeSim(0, 3)
			k.obs.Rollout.Spec.MaxUnavailable = "2"
			return k
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			k := mk()
			got := k.run(t, 60)
			for _, n := range k.obs.Nodes {
				if n.Kube != nil {
					got += fmt.Sprintf("%s: unschedulable=%v ready=%v pods=%v\n", n.Name, n.Kube.Unschedulable, n.Kube.Ready, n.Kube.Pods)
				}
			}
			golden(t, name, got)
		})
	}
}

// TestPlanWorkersDrainBeforeSwitch: every worker's Node is cordoned and
// holds no pod when its switch starts, is Ready when it is marked done,
// and ends schedulable.
func TestPlanWorkersDrainBeforeSwitch(t *testing.T) {
	k := newKubeSim(1, 3)
	k.runDrained(t, 60)
	if !slices.Equal(k.obs.Rollout.Spec.Kubernetes.Workers, []string{"dp-1", "dp-2", "dp-3"}) {
		t.Fatal(k.obs.Rollout.Spec.Kubernetes.Workers)
	}
}

// runDrained runs the sim to its end (at most max steps) checking, at
// every step, what a drained roll guarantees: a node's Node is cordoned
// and holds no pod when its switch starts, and a node with a Node does
// not lead etcd then (these sims give no Node to a lone voter); it is Ready (Node and API server) when marked done; the
// rollout succeeds and leaves no Node cordoned.
func (k *kubeSim) runDrained(t *testing.T, max int) {
	t.Helper()
	var errs []string
	k.sim.check = func(step Step) {
		for _, name := range step.Nodes {
			n := k.node(name)
			switch step.Action {
			case Start:
				if n.Kube != nil && (!n.Kube.Unschedulable || len(n.Kube.Pods) > 0) {
					errs = append(errs, fmt.Sprintf("%s starts with its Node %+v", name, *n.Kube))
				}
				if n.Kube != nil && n.Leader {
					errs = append(errs, name+" starts while it leads etcd")
				}
			case MarkDone:
				if n.Kube != nil && (!n.Kube.Ready || n.Kube.Unschedulable) {
					errs = append(errs, fmt.Sprintf("%s done with its Node %+v", name, *n.Kube))
				}
				if n.APIServer != nil && !n.APIServer.Ready {
					errs = append(errs, name+" done with its API server not ready")
				}
			}
		}
	}
	k.run(t, max)
	if k.obs.Rollout.Status.Phase != api.RolloutSucceeded {
		t.Fatalf("phase %s", k.obs.Rollout.Status.Phase)
	}
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, n := range k.obs.Nodes {
		if n.Kube != nil && n.Kube.Unschedulable {
			t.Errorf("%s left cordoned", n.Name)
		}
	}
}

// TestPlanControlPlaneKubeletsDrainBeforeSwitch: a control-plane
// machine with a Node is cordoned and holds no pod when its switch
// starts, never switches while it leads etcd, is Ready (Node and API
// server) when marked done, and ends schedulable.
func TestPlanControlPlaneKubeletsDrainBeforeSwitch(t *testing.T) {
	k := newKubeSim(3, 2)
	k.withControlPlaneKubelets()
	k.hooks[2] = leaderTo("cp-2") // leadership moves to the first one draining
	k.runDrained(t, 80)
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to record)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs from the golden:\n--- got\n%s--- want\n%s", name, got, want)
	}
}
