package faults

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"
)

// randomRun draws faults from a seeded source.
type randomRun struct {
	s   *scenario
	rng *rand.Rand
	n   int // nodes running
}

func newRandomRun(s *scenario, seed uint64) *randomRun {
	return &randomRun{s: s, rng: rand.New(rand.NewPCG(seed, 0x6661756c7473)), n: 3}
}

// step injects one fault, undoes it once the clients have had writes
// acknowledged meanwhile (or at once, for a kill), and returns what it did
// and how long the cluster took to catch up after.
func (r *randomRun) step() (string, time.Duration) {
	s, c := r.s, r.s.c
	i := r.rng.IntN(r.n)
	name := c.nodes[i].name
	var what string
	switch r.rng.IntN(5) {
	case 0:
		what = "kill -9 and restart the coordinator candidate on " + name
		if p := c.nodes[i].coord; p != nil {
			p.kill9()
		}
		c.startCoordinator(i)
	case 1:
		what = "kill -9 the etcd member of " + name + " (its agent restarts it)"
		c.killEtcd(i)
	case 2:
		what = "kill -9 and restart the agent (and its etcd) of " + name
		c.killAgent(i)
		c.startAgent(i)
	case 3:
		what = "SIGSTOP the agent and etcd of " + name + " for 30 writes, then SIGCONT"
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
	default:
		what = fmt.Sprintf("cut %s off both ways for 30 writes", name)
		s.fault(name, true)
		c.net.cut(i)
		s.waitWrites(90*time.Second, 30)
		c.net.heal()
		s.fault(name, false)
	}
	from := time.Now()
	s.waitCaughtUp(90 * time.Second)
	return what, time.Since(from)
}
