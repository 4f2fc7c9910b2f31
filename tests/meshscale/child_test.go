package meshscale

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/jonboulle/clockwork"
)

// viewEvery is how often a child reports its members' views.
const viewEvery = 250 * time.Millisecond

// joinPace bounds how long a child waits for one member to join before it
// starts the next.
const joinPace = 200 * time.Millisecond

// childMesh is one child process's members and what it reports of them.
type childMesh struct {
	spec childSpec
	log  *slog.Logger

	outMu sync.Mutex
	out   *json.Encoder

	// mu guards members; viewMu guards the fields below it and each
	// member's crashed, seenAt and deadAt, so a slow member delays
	// reports, never starts.
	mu        sync.Mutex
	members   []*member
	viewMu    sync.Mutex
	want      int    // alive count every member should see
	victim    string // the member whose failure is being watched
	seenSent  bool   // the victim's SeenTimes have been reported
	fullSince int64
}

// member is one mesh member of the child.
type member struct {
	name    string
	mesh    *gossip.Mesh
	cancel  context.CancelFunc
	crashed bool
	// seenAt and deadAt are when this member first saw the victim suspect
	// (or dead) and dead, by its state clock; 0 until it has.
	seenAt, deadAt int64
}

// runChild runs the members spec (JSON) describes, reporting on out, until
// in closes; it returns the process's exit code. The members do not leave
// when in closes: the process ends as a crash would end it.
func runChild(specJSON string, in io.Reader, out io.Writer) int {
	c := &childMesh{log: slog.New(slog.DiscardHandler), out: json.NewEncoder(out)}
	if err := json.Unmarshal([]byte(specJSON), &c.spec); err != nil {
		c.send(report{Type: repError, Err: fmt.Sprintf("%s: %v", envChild, err)})
		return 2
	}
	c.want = c.spec.Total
	base := rssKiB(os.Getpid())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	closed := make(chan struct{})
	go func() {
		defer close(closed) // the parent closed stdin, or is gone
		c.commands(bufio.NewScanner(in))
	}()
	go c.views(ctx)
	started := make(chan error, 1)
	go func() { started <- c.start(ctx) }()
	for {
		select {
		case <-closed:
			return 0
		case err := <-started:
			if err != nil {
				c.send(report{Type: repError, Err: err.Error()})
				return 1
			}
			c.send(report{Type: repStarted, Members: c.spec.Count, BaseKiB: base})
			started = nil
		}
	}
}

// start starts the child's members one after another, each once the one
// before has joined (or joinPace has passed), as a fleet comes up.
func (c *childMesh) start(ctx context.Context) error {
	profile, tune, err := timings(c.spec.Tune)
	if err != nil {
		return err
	}
	var addrs []string
	for j := range c.spec.Count {
		name := fmt.Sprintf("c%02d-m%04d", c.spec.Index, j)
		m, err := gossip.New(gossip.Config{
			Name: name, BindAddr: c.spec.IP, Profile: profile, Tune: tune,
			Token: []byte("meshscale"), Logger: c.log, Seeds: c.seedsFor(addrs),
			Meta: gossip.Meta{Roles: []string{"worker"}, Version: "meshscale", Health: gossip.HealthOK},
		})
		if err != nil {
			return fmt.Errorf("member %s: %w", name, err)
		}
		if err := m.Start(); err != nil {
			return fmt.Errorf("member %s: %w", name, err)
		}
		mctx, mcancel := context.WithCancel(ctx)
		go func() { _ = m.Run(mctx) }() // joins its seeds, retrying; polls as an agent does
		c.mu.Lock()
		c.members = append(c.members, &member{name: name, mesh: m, cancel: mcancel})
		c.mu.Unlock()
		addrs = append(addrs, m.Addr())
		if c.spec.Index == 0 && len(addrs) == min(seedMembers, c.spec.Count) {
			c.send(report{Type: repSeeds, Addrs: addrs})
		}
		if c.spec.Index == 0 && j == 0 {
			continue // the mesh's first member: nobody to join
		}
		// Past joinPace the next one starts anyway: the error is no failure.
		_ = testwait.Until(ctx, clockwork.NewRealClock(), joinPace, 5*time.Millisecond, func() (bool, string) {
			return m.StateCounts()[gossip.Alive] >= 2, "not joined"
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// seedsFor picks the seeds of the next member, given the addresses of the
// child's members started so far: one of child 0's seed members (for child
// 0, one of its own first members) and up to two earlier members of its own.
func (c *childMesh) seedsFor(started []string) []string {
	pool := c.spec.Seeds
	if c.spec.Index == 0 {
		pool = started[:min(len(started), seedMembers)]
	}
	if len(pool) == 0 {
		return nil
	}
	seeds := []string{pool[rand.IntN(len(pool))]}
	for _, j := range rand.Perm(len(started))[:min(len(started), 2)] {
		if started[j] != seeds[0] {
			seeds = append(seeds, started[j])
		}
	}
	return seeds
}

// commands follows the parent's commands until sc ends.
func (c *childMesh) commands(sc *bufio.Scanner) {
	for sc.Scan() {
		verb, name, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		switch verb {
		case cmdWatch:
			c.watch(name)
		case cmdCrash:
			c.watch(name)
			c.crash(name)
		default:
			c.send(report{Type: repError, Err: fmt.Sprintf("unknown command %q", sc.Text())})
		}
	}
}

// watch makes name the victim: one member fewer is alive, and every
// member's view of name is followed from now on.
func (c *childMesh) watch(name string) {
	c.viewMu.Lock()
	defer c.viewMu.Unlock()
	c.victim = name
	c.want--
	c.fullSince = 0
	c.seenSent = false
	for _, m := range c.all() {
		m.seenAt, m.deadAt = 0, 0
	}
}

// crash shuts name's member down without leaving (its ports close, as when
// its process is killed) and reports the time.
func (c *childMesh) crash(name string) {
	c.viewMu.Lock()
	var victim *member
	for _, m := range c.all() {
		if m.name == name && !m.crashed {
			victim = m
		}
	}
	if victim != nil {
		victim.crashed = true
	}
	c.viewMu.Unlock()
	if victim == nil {
		c.send(report{Type: repError, Err: fmt.Sprintf("crash %s: no such running member", name)})
		return
	}
	at := time.Now()
	_ = victim.mesh.Shutdown()
	victim.cancel() // its Run ends; the leave it tries finds the mesh shut down
	c.send(report{Type: repCrashed, Victim: name, At: at.UnixNano()})
}

// views reports the members' views every viewEvery until ctx ends.
func (c *childMesh) views(ctx context.Context) {
	t := time.NewTicker(viewEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.send(c.view())
		}
	}
}

// view counts the running members' views: how many see every member
// alive, and, while a victim is watched, how many see it suspect or dead.
func (c *childMesh) view() report {
	c.viewMu.Lock()
	defer c.viewMu.Unlock()
	r := report{Type: repView, At: time.Now().UnixNano(), Want: c.want, Victim: c.victim}
	members := c.all()
	for _, m := range members {
		if m.crashed {
			continue
		}
		r.Members++
		counts := m.mesh.StateCounts()
		alive := counts[gossip.Alive]
		r.AliveViews += alive
		r.SuspectViews += counts[gossip.Suspect]
		for _, k := range counts {
			r.KnownViews += k
		}
		if alive == c.want {
			r.Full++
		}
		if c.victim != "" {
			m.follow(c.victim)
			if m.seenAt != 0 {
				r.Seen++
				r.LastSeen = max(r.LastSeen, m.seenAt)
			} else if r.Unseen == "" && m.name != c.victim {
				r.Unseen = m.name
			}
			if m.deadAt != 0 {
				r.Dead++
				r.LastDead = max(r.LastDead, m.deadAt)
			}
		}
	}
	if c.victim != "" && !c.seenSent && r.Seen == r.Members {
		for _, m := range members {
			if !m.crashed {
				r.SeenTimes = append(r.SeenTimes, m.seenAt)
			}
		}
		c.seenSent = true
	}
	started := len(members) == c.spec.Count
	switch {
	case !started || r.Full < r.Members:
		c.fullSince = 0
	case c.fullSince == 0:
		c.fullSince = r.At
	}
	r.FullSince = c.fullSince
	return r
}

// all is the members started so far, crashed ones included.
func (c *childMesh) all() []*member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.members)
}

// follow records when m first saw victim suspect and dead.
func (m *member) follow(victim string) {
	if m.deadAt != 0 {
		return
	}
	n, ok := m.mesh.Node(victim)
	if !ok {
		return
	}
	switch n.State {
	case gossip.Suspect:
		if m.seenAt == 0 {
			m.seenAt = n.Since.UnixNano()
		}
	case gossip.Dead, gossip.Left:
		m.deadAt = n.Since.UnixNano()
		if m.seenAt == 0 {
			m.seenAt = m.deadAt
		}
	}
}

// send writes r as one line.
func (c *childMesh) send(r report) {
	if r.At == 0 {
		r.At = time.Now().UnixNano()
	}
	c.outMu.Lock()
	defer c.outMu.Unlock()
	_ = c.out.Encode(r) // a parent that is gone closes stdin too
}
