package rollout

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// sim is a fleet the planner rolls: agents apply at once (or fail), etcd
// leadership moves when asked.
type sim struct {
	obs Observed
	now time.Time
	// fail: node -> revision that fails there; silent: nodes that never report.
	fail   map[string]string
	silent map[string]bool
	// hooks run before the step at that index.
	hooks map[int]func(*sim)
	// busy: steps during which a membership operation holds the slot.
	busy map[int]bool
	// delay: how many steps a node's agent lets pass before it answers a
	// new generation; waited counts them.
	delay, waited map[string]int
	// joining: the nodes that were joining a Kubernetes cluster when their
	// step began (they do not count against maxUnavailable).
	joining map[string]bool
	// check sees each step before it is applied; before and after run
	// around its Record (the executor's side effects).
	check, before, after func(Step)
}

func newSim(cp, dp int, leader string) *sim {
	s := &sim{now: time.Unix(1_000_000, 0).UTC(), fail: map[string]string{}, silent: map[string]bool{}, hooks: map[int]func(*sim){}, busy: map[int]bool{},
		delay: map[string]int{}, waited: map[string]int{}, joining: map[string]bool{}}
	for i := 1; i <= cp; i++ {
		name := fmt.Sprintf("cp-%d", i)
		s.obs.Nodes = append(s.obs.Nodes, Node{Name: name, ControlPlane: true, Alive: true, Voter: true, Healthy: true, Leader: name == leader, MemberID: api.MemberID(i), ClientURL: "http://" + name,
			Config: cfg(name, "v1")})
	}
	for i := 1; i <= dp; i++ {
		name := fmt.Sprintf("dp-%d", i)
		s.obs.Nodes = append(s.obs.Nodes, Node{Name: name, Alive: true, Config: cfg(name, "v1")})
	}
	s.obs.ClusterHealthy = true
	s.obs.Rollout = api.NewRollout("r1")
	s.obs.Rollout.Spec.Template = api.NixosConfigurationSpec{GitRepo: "https://git.example/fleet", Revision: "v2"}
	return s
}

func cfg(name, rev string) *api.NixosConfiguration {
	c := api.NewNixosConfiguration(name)
	c.Spec = api.NixosConfigurationSpec{Generation: 1, GitRepo: "https://git.example/fleet", Revision: rev}
	c.Status = api.NixosConfigurationStatus{Generation: 1, Phase: api.GenerationApplied, AppliedGeneration: 1}
	return c
}

// run plans until nothing is left to do and returns the transcript.
func (s *sim) run(t *testing.T, max int) string {
	var out strings.Builder
	start := s.now
	for i := 0; i < max; i++ {
		if h := s.hooks[i]; h != nil {
			h(s)
		}
		s.obs.ActiveOp = s.obs.Rollout.Status.Operation
		if s.busy[i] {
			s.obs.ActiveOp = "join-cp-9"
		}
		step := Plan(s.obs, s.now)
		fmt.Fprintf(&out, "%3ds %s\n", int(s.now.Sub(start).Seconds()), step)
		if s.check != nil {
			s.check(step)
		}
		if step.Action == None && !s.later(i) {
			break
		}
		s.apply(step)
		s.checkUnavailable(t)
		s.now = s.now.Add(time.Minute)
	}
	fmt.Fprintf(&out, "phase=%s", s.obs.Rollout.Status.Phase)
	for _, p := range s.obs.Rollout.Status.Nodes {
		ph := string(p.Phase)
		if ph == "" {
			ph = "Pending"
		}
		fmt.Fprintf(&out, " %s:%s", p.Name, ph)
	}
	for _, n := range s.obs.Nodes {
		if n.Leader {
			fmt.Fprintf(&out, " leader=%s", n.Name)
		}
	}
	out.WriteString("\n")
	return out.String()
}

// later tells whether a hook or a busy step comes after step i.
func (s *sim) later(i int) bool {
	for j := range s.busy {
		if j > i {
			return true
		}
	}
	for j := range s.hooks {
		if j > i {
			return true
		}
	}
	return false
}

func (s *sim) node(name string) *Node { return s.obs.node(name) }

// apply plays the executor and the agents.
func (s *sim) apply(step Step) {
	r := s.obs.Rollout
	switch step.Action {
	case Start, Extend, MarkDone:
		for _, name := range step.Starts() {
			n := s.node(name)
			n.Config = Configure(r, r.Node(name), n.Config)
			s.waited[name] = 0
		}
	case TransferLeader:
		for i := range s.obs.Nodes {
			s.obs.Nodes[i].Leader = s.obs.Nodes[i].MemberID == step.To
		}
	}
	if step.Action == Start || step.Action == Extend || step.Action == Drain || len(step.Extend) > 0 {
		for _, name := range append(slices.Clone(step.Nodes), step.Extend...) {
			if p := r.Node(name); p != nil && p.Phase == api.NodePending {
				s.joining[name] = joiningWorker(s.obs, name)
			}
		}
	}
	if s.before != nil {
		s.before(step)
	}
	Record(r, step, s.now, "c-1")
	if s.after != nil {
		s.after(step)
	}
	// Agents answer.
	for i := range s.obs.Nodes {
		n := &s.obs.Nodes[i]
		c := n.Config
		if c == nil || c.Settled() != api.GenerationPending || s.silent[n.Name] {
			continue
		}
		if s.waited[n.Name] < s.delay[n.Name] {
			s.waited[n.Name]++
			continue
		}
		c.Status.Generation, c.Status.Attempt = c.Spec.Generation, c.Spec.Attempt
		if s.fail[n.Name] != "" && s.fail[n.Name] == c.Spec.Revision {
			c.Status.Phase, c.Status.LastError = api.GenerationFailed, "apply: health check failed: app.service failed"
		} else {
			c.Status.Phase, c.Status.AppliedGeneration = api.GenerationApplied, c.Spec.Generation
		}
	}
}

// checkUnavailable fails t when more data-plane nodes apply at once than
// maxUnavailable lets (nodes joining a Kubernetes cluster do not count),
// or more than one control-plane node.
func (s *sim) checkUnavailable(t *testing.T) {
	t.Helper()
	r := s.obs.Rollout
	total, dp, cp := 0, 0, 0
	for _, p := range r.Status.Nodes {
		if !p.ControlPlane {
			total++
		}
		if p.Phase != api.NodeApplying && p.Phase != api.NodeReverting && p.Phase != api.NodeDraining {
			continue
		}
		switch {
		case p.ControlPlane:
			cp++
		case !s.joining[p.Name]:
			dp++
		}
	}
	k, err := r.Spec.BatchSize(total)
	if err != nil {
		return
	}
	if dp > k || cp > 1 || (cp > 0 && dp > 0) {
		t.Fatalf("at %s: %d data-plane and %d control-plane nodes unavailable at once; maxUnavailable lets %d data-plane nodes or one control-plane node", s.now, dp, cp, k)
	}
}

func TestPlanGolden(t *testing.T) {
	cases := map[string]func() *sim{
		"default-order":    func() *sim { return newSim(3, 3, "cp-1") },
		"leader-in-middle": func() *sim { return newSim(3, 1, "cp-2") },
		"max-unavailable-2": func() *sim {
			s := newSim(1, 5, "cp-1")
			s.obs.Rollout.Spec.MaxUnavailable = "2"
			return s
		},
		"max-unavailable-percent": func() *sim {
			s := newSim(1, 10, "cp-1")
			s.obs.Rollout.Spec.MaxUnavailable = "30%"
			return s
		},
		"control-plane-first": func() *sim {
			s := newSim(3, 2, "cp-3")
			s.obs.Rollout.Spec.ControlPlaneFirst = true
			return s
		},
		"halt-on-second-node": func() *sim {
			s := newSim(3, 3, "cp-1")
			s.fail["dp-2"] = "v2"
			return s
		},
		"halt-then-undo": func() *sim {
			s := newSim(3, 3, "cp-1")
			s.fail["cp-2"] = "v2"
			s.hooks[12] = func(s *sim) { s.obs.Rollout.Spec.Undo = true }
			return s
		},
		"pause-resume": func() *sim {
			s := newSim(2, 2, "cp-1")
			s.hooks[3] = func(s *sim) { s.obs.Rollout.Spec.Paused = true }
			s.hooks[6] = func(s *sim) { s.obs.Rollout.Spec.Paused = false }
			return s
		},
		"step-timeout": func() *sim {
			s := newSim(1, 2, "cp-1")
			s.obs.Rollout.Spec.StepTimeout = api.Duration(3 * time.Minute)
			s.silent["dp-1"] = true
			return s
		},
		"membership-op-waits": func() *sim {
			s := newSim(2, 1, "cp-1")
			s.busy[2], s.busy[3] = true, true
			return s
		},
		"unhealthy-cluster-waits": func() *sim {
			s := newSim(3, 0, "cp-1")
			s.hooks[2] = func(s *sim) { s.obs.ClusterHealthy, s.obs.ClusterReason = false, "cp-3 does not answer" }
			s.hooks[4] = func(s *sim) { s.obs.ClusterHealthy = true; delete(s.hooks, 2); delete(s.hooks, 4) }
			return s
		},
		"single-control-plane": func() *sim { return newSim(1, 0, "cp-1") },
		"dead-node-halts": func() *sim {
			s := newSim(1, 2, "cp-1")
			s.obs.Rollout.Spec.StepTimeout = api.Duration(3 * time.Minute)
			s.node("dp-2").Alive = false
			return s
		},
		// A voter whose heartbeat lease lapsed in a partition: its member
		// serves again before its agent has a new lease.
		"down-node-comes-back": func() *sim {
			s := newSim(3, 0, "cp-1")
			s.node("cp-2").Alive = false
			s.hooks[4] = func(s *sim) { s.node("cp-2").Alive = true }
			return s
		},
		// dp-1 dies while it applies: once it is dead past
		// replaceDeadMembersAfter it is being replaced, and the rollout
		// halts rather than hold the slot for the step timeout.
		"dead-in-flight-replaced": func() *sim {
			s := newSim(1, 2, "cp-1")
			s.obs.ReplaceDeadAfter = 2 * time.Minute
			s.silent["dp-1"] = true
			s.hooks[3] = func(s *sim) { s.node("dp-1").Alive, s.node("dp-1").DeadSince = false, s.now }
			return s
		},
		// cp-2, to roll next, has been dead past replaceDeadMembersAfter:
		// no wait for it.
		"dead-next-replaced": func() *sim {
			s := newSim(3, 0, "cp-1")
			s.obs.ReplaceDeadAfter = 2 * time.Minute
			s.node("cp-2").Alive, s.node("cp-2").DeadSince = false, s.now.Add(-time.Minute)
			return s
		},
		// cp-3 is removed from the fleet (its member replaced) before its
		// turn.
		"removed-node-halts": func() *sim {
			s := newSim(3, 0, "cp-1")
			s.hooks[2] = func(s *sim) {
				s.obs.Nodes = slices.DeleteFunc(s.obs.Nodes, func(n Node) bool { return n.Name == "cp-3" })
			}
			return s
		},
		// dp-1 is slow: as the others finish, the next ones start within
		// the step, two applying at all times; the control plane waits
		// for the step to end.
		"window-keeps-the-step-wide": func() *sim {
			s := newSim(2, 6, "cp-1")
			s.obs.Rollout.Spec.MaxUnavailable = "2"
			s.delay["dp-1"] = 6
			return s
		},
		// A membership change waits for the slot from the sixth step: the
		// step starts no more nodes, ends, and the next waits until the
		// change is no longer waiting.
		"window-yields-to-a-waiting-change": func() *sim {
			s := newSim(1, 6, "cp-1")
			s.obs.Rollout.Spec.MaxUnavailable = "2"
			s.delay["dp-1"] = 6
			s.hooks[5] = func(s *sim) { s.obs.SlotWanted = "membership (add cp-9)" }
			s.hooks[10] = func(s *sim) { s.obs.SlotWanted = "" }
			return s
		},
		"window-paused": func() *sim {
			s := newSim(1, 5, "cp-1")
			s.obs.Rollout.Spec.MaxUnavailable = "2"
			s.delay["dp-1"] = 2
			s.hooks[3] = func(s *sim) { s.obs.Rollout.Spec.Paused = true }
			s.hooks[7] = func(s *sim) { s.obs.Rollout.Spec.Paused = false }
			return s
		},
		// dp-3, next in order, is down: the step starts nothing past it.
		"window-stops-at-a-down-node": func() *sim {
			s := newSim(1, 4, "cp-1")
			s.obs.Rollout.Spec.MaxUnavailable = "2"
			s.delay["dp-1"] = 2
			s.node("dp-3").Alive = false
			s.hooks[4] = func(s *sim) { s.node("dp-3").Alive = true }
			return s
		},
		"bad-max-unavailable": func() *sim {
			s := newSim(1, 2, "cp-1")
			s.obs.Rollout.Spec.MaxUnavailable = "0%"
			return s
		},
		"subset-of-nodes": func() *sim {
			s := newSim(3, 3, "cp-1")
			s.obs.Rollout.Spec.Nodes = []string{"dp-3", "cp-1", "cp-2"}
			return s
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			got := mk().run(t, 60)
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
		})
	}
}
