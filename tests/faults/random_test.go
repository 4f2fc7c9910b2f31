package faults

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/failpoint"
)

// randomRun draws faults and rollouts from a seeded source.
type randomRun struct {
	s    *scenario
	rng  *rand.Rand
	n    int // nodes running
	roll int // rollouts filed so far (their names and revisions)
}

func newRandomRun(s *scenario, seed uint64) *randomRun {
	return &randomRun{s: s, rng: rand.New(rand.NewPCG(seed, 0x6661756c7473)), n: 3}
}

// The kinds of step a random run draws: five faults, then three rollouts.
const (
	faultKinds   = 5
	rolloutKinds = 3
)

// step injects one fault or runs one rollout, and returns what it did and
// how long the cluster took to catch up after.
func (r *randomRun) step() (string, time.Duration) {
	var what string
	switch k := r.rng.IntN(faultKinds + rolloutKinds); {
	case k < faultKinds:
		what = r.fault(k)
	case k == faultKinds:
		what = r.rolloutUnderFault()
	case k == faultKinds+1:
		what = r.rolloutLeaderKilled()
	default:
		what = r.badRollout()
	}
	from := time.Now()
	r.s.waitCaughtUp(90 * time.Second)
	return what, time.Since(from)
}

// fault injects fault kind k (< faultKinds) on a node drawn at random and
// undoes it once the clients have had writes acknowledged meanwhile (or
// at once, for a kill).
func (r *randomRun) fault(k int) string {
	s, c := r.s, r.s.c
	i := r.rng.IntN(r.n)
	name := c.nodes[i].name
	switch k {
	case 0:
		if p := c.nodes[i].coord; p != nil {
			p.kill9()
		}
		c.startCoordinator(i)
		return "kill -9 and restart the coordinator candidate on " + name
	case 1:
		c.killEtcd(i)
		return "kill -9 the etcd member of " + name + " (its agent restarts it)"
	case 2:
		c.killAgent(i)
		c.startAgent(i)
		return "kill -9 and restart the agent (and its etcd) of " + name
	case 3:
		s.fault(name, true)
		pid, ok := c.nodes[i].agent.etcdPid()
		_ = c.nodes[i].agent.signal(syscall.SIGSTOP)
		if ok { // never pid 0: that is the test's own process group
			_ = syscall.Kill(pid, syscall.SIGSTOP)
		}
		s.waitWrites(90*time.Second, 30)
		if ok {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		_ = c.nodes[i].agent.signal(syscall.SIGCONT)
		s.fault(name, false)
		return "SIGSTOP the agent and etcd of " + name + " for 30 writes, then SIGCONT"
	default:
		s.fault(name, true)
		c.net.cut(i)
		s.waitWrites(90*time.Second, 30)
		c.net.heal()
		s.fault(name, false)
		return fmt.Sprintf("cut %s off both ways for 30 writes", name)
	}
}

// running is the names of the nodes the run has started.
func (r *randomRun) running() []string {
	var out []string
	for i := range r.n {
		out = append(out, r.s.c.nodes[i].name)
	}
	return out
}

// nextRollout names the next rollout.
func (r *randomRun) nextRollout() string {
	r.roll++
	return fmt.Sprintf("r%d", r.roll)
}

// rolloutUnderFault files a rollout of a new revision and injects one
// random fault while it runs; the rollout must succeed within 180 s and
// every running node run the revision. (A node killed while it switches
// may apply it twice: here "applied" is not counted, only where each node
// ends.)
func (r *randomRun) rolloutUnderFault() string {
	s := r.s
	name := r.nextRollout()
	rev := "v" + name[1:]
	s.startRollout(name, rev)
	what := r.fault(r.rng.IntN(faultKinds))
	s.waitRollout(name, 180*time.Second, api.RolloutSucceeded)
	s.checkRunning(rev, r.running())
	return fmt.Sprintf("rollout %s of %s, meanwhile: %s", name, rev, what)
}

// rolloutLeaderKilled makes a candidate drawn at random the coordinator
// leader, armed at a rollout-step failpoint drawn at random, files a
// rollout, and restarts it unarmed once it exited there: the rollout
// succeeds within 120 s of the crash, every running node applied the
// revision exactly once.
func (r *randomRun) rolloutLeaderKilled() string {
	s, c := r.s, r.s.c
	point := []string{failpoint.CoordBeforeRolloutStep, failpoint.CoordAfterRolloutStep}[r.rng.IntN(2)]
	var cands []int
	for i := range r.n {
		if c.nodes[i].coord != nil {
			cands = append(cands, i)
		}
	}
	armed := cands[r.rng.IntN(len(cands))]
	for _, i := range cands {
		c.nodes[i].coord.kill9()
	}
	c.startCoordinator(armed, failpoint.Env+"="+point)
	s.waitLeader(30*time.Second, "c-"+c.nodes[armed].name)
	for _, i := range cands {
		if i != armed {
			c.startCoordinator(i)
		}
	}
	name := r.nextRollout()
	rev := "v" + name[1:]
	s.startRollout(name, rev)
	crashed := s.waitFailpoint(c.nodes[armed].coord, point, 60*time.Second)
	c.startCoordinator(armed)
	s.waitRollout(name, 120*time.Second-time.Since(crashed), api.RolloutSucceeded)
	s.checkAppliedOnceBy(rev, r.running())
	return fmt.Sprintf("rollout %s of %s, the leader c-%s killed at %s", name, rev, c.nodes[armed].name, point)
}

// badRollout files a rollout of a generation whose health check fails on
// the first node it rolls to: it halts there, not rolled on (badRollout).
func (r *randomRun) badRollout() string {
	name := r.nextRollout()
	r.s.badRollout(name)
	return "rollout " + name + " of a generation that fails its health check on the first node: halted, not rolled on"
}

// checkAppliedOnceBy records a breach unless the nodes names, and no
// other, applied revision, each exactly once.
func (s *scenario) checkAppliedOnceBy(revision string, names []string) {
	got := slices.Sorted(slices.Values(s.c.applied(revision)))
	want := slices.Sorted(slices.Values(names))
	if !slices.Equal(got, want) {
		s.w.breach("%s applied by %v, want each of %v once", revision, got, want)
	}
}

// checkRunning waits up to 30 s until each node of names runs revision
// (the applier's <machine>.running file), and records a breach if one
// does not.
func (s *scenario) checkRunning(revision string, names []string) {
	var off []string
	ok := poll(30*time.Second, func() bool {
		off = off[:0]
		for _, n := range names {
			if got := s.c.runningRevision(n); got != revision {
				off = append(off, n+" runs "+got)
			}
		}
		return len(off) == 0
	})
	if !ok {
		s.w.breach("after rollout of %s: %v", revision, off)
	}
}

// runningRevision is the revision machine last applied (the applier's
// <machine>.running file), or "none".
func (c *cluster) runningRevision(machine string) string {
	b, err := os.ReadFile(filepath.Join(c.gens, machine+".running"))
	if err != nil {
		return "none"
	}
	return strings.TrimSpace(string(b))
}
