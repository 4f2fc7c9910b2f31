package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/events"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// smallDisk mounts a tmpfs of size at node i's etcd data dir before its
// agent starts; it is unmounted (lazily) when the scenario ends.
func smallDisk(i int, size string) func(*cluster) {
	return func(c *cluster) {
		dir := c.etcdDir(i)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			c.t.Fatal(err)
		}
		must(c.t, "mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir)
		c.t.Cleanup(func() { _ = run("umount", "-l", dir) })
	}
}

// fill writes a file into dir until the file system is full and returns
// its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", dir, err)
			}
			break
		}
	}
	// Fill the last partial block too.
	for _, n := range []int{64 << 10, 4 << 10, 512} {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	return path
}

// memberIDs is the sorted member IDs.
func (s *scenario) memberIDs() []uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := s.cli.MemberList(ctx)
	if err != nil {
		return nil
	}
	var ids []uint64
	for _, m := range resp.Members {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	return ids
}

// opsSince are the names of the operations created after since.
func (s *scenario) opsSince(since time.Time) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ops, _, err := store.List[api.Operation](ctx, s.st, store.OpsDir)
	if err != nil {
		return nil
	}
	var out []string
	for _, op := range ops {
		if op.Metadata.CreatedAt.After(since) {
			out = append(out, op.Metadata.Name+" "+string(op.Spec.Type)+" "+op.Spec.Node)
		}
	}
	return out
}

// TestVoterDiskFull: cp-3's etcd data dir is a 256 MiB tmpfs; under a
// write workload it is filled to the last byte. Within 60 s cp-3's member
// stops serving (etcd cannot write its WAL, snapshot or database);
// meanwhile and for 15 s more nothing else changes: the same members, no
// membership operation started, the other two voters acknowledge writes.
// Once the filler is removed, cp-3 serves and catches up within 90 s.
// The operator is told within 30 s of the member stopping: cp-3's node
// status reports its data dir full (Node.Status.DataDir), the
// EtcdCluster's status marks its member unhealthy with "data dir full",
// and a DataDirFull event is derived; DataDirSpaceReturned once freed.
// etcd raises its NOSPACE alarm only past its backend quota, not on a
// full disk; the alarms are logged, not required.
func TestVoterDiskFull(t *testing.T) {
	requireE2E(t)
	s := newScenario(t, "a voter's disk filled (tmpfs), then space returns", 3, 3, smallDisk(2, "256m"))
	c := s.c
	evs := s.followEvents()
	s.startWorkload(3, 14)
	s.waitWrites(30*time.Second, 100)
	before := s.memberIDs()
	s.fault("cp-3", true)
	filled := time.Now()
	filler := fill(t, c.etcdDir(2))
	testwait.For(t, 60*time.Second, "cp-3's member to stop serving on a full disk", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := s.cli.Put(ctx, "faults/disk-probe", time.Now().String())
		if err != nil {
			return false, "put: " + err.Error()
		}
		sctx, scancel := context.WithTimeout(context.Background(), time.Second)
		defer scancel()
		_, err = s.cli.Status(sctx, c.clientURL(2))
		return err != nil, "cp-3 still answers"
	})
	t.Logf("cp-3 stopped serving %s after the fill", time.Since(filled).Round(time.Millisecond))
	// The operator is told: cp-3's node reports its data dir full, the
	// EtcdCluster's status says so for its member, and an event follows.
	s.waitDataDir(30*time.Second, "cp-3", true, evs)
	t.Logf("cp-3 reported its data dir full %s after the fill", time.Since(filled).Round(time.Millisecond))
	testwait.For(t, 30*time.Second, "the EtcdCluster's status to name cp-3's full data dir", func() (bool, string) {
		ec := &api.EtcdCluster{}
		if err := s.st.Get(t.Context(), store.EtcdClusterKey, ec); err != nil {
			return false, err.Error()
		}
		for _, m := range ec.Status.Members {
			if m.Node == "cp-3" {
				return !m.Healthy && strings.Contains(m.Message, "data dir full"), fmt.Sprintf("cp-3 %+v", m)
			}
		}
		return false, "no member cp-3 in the status"
	})
	s.waitWrites(30*time.Second, 50)
	hold := time.Now()
	testwait.True(t, 30*time.Second, "15 s held", func() bool {
		if got := s.memberIDs(); got != nil && !slices.Equal(got, before) {
			t.Fatalf("members changed on a full disk: %x, were %x", got, before)
		}
		if ops := s.opsSince(filled); len(ops) > 0 {
			t.Fatalf("operations started on a full disk: %v", ops)
		}
		return time.Since(hold) >= 15*time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	alarms, err := s.cli.AlarmList(ctx)
	cancel()
	if err == nil {
		t.Logf("alarms on a full disk: %v", alarms.Alarms)
	}
	n := &api.Node{}
	if err := s.st.Get(t.Context(), store.NodeKey("cp-3"), n); err == nil {
		t.Logf("cp-3's node status: phase %s, member state %s, message %q", n.Status.Phase, n.Status.MemberState, n.Status.Message)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	s.waitCaughtUp(90 * time.Second)
	took := time.Since(freed)
	s.waitDataDir(30*time.Second, "cp-3", false, evs)
	if got := s.memberIDs(); !slices.Equal(got, before) {
		s.w.breach("members changed: %s, were %s", fmt.Sprintf("%x", got), fmt.Sprintf("%x", before))
	}
	s.fault("cp-3", false)
	s.waitWrites(30*time.Second, 50)
	s.finish(took)
}

// eventLog collects the events a feed derives while the scenario runs.
type eventLog struct {
	mu  sync.Mutex
	evs []events.Event
}

// has reports an event of reason naming node.
func (l *eventLog) has(reason, node string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.evs, func(e events.Event) bool { return e.Reason == reason && slices.Contains(e.Nodes, node) })
}

// followEvents follows the store's event feed (what nicoctl events
// --watch shows) until the scenario ends.
func (s *scenario) followEvents() *eventLog {
	l := &eventLog{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = events.NewFeed(s.st, time.Now).Follow(ctx, events.Handler{Event: func(e events.Event) error {
			l.mu.Lock()
			l.evs = append(l.evs, e)
			l.mu.Unlock()
			return nil
		}})
	}()
	s.t.Cleanup(func() { cancel(); <-done })
	return l
}

// waitDataDir waits until node's status reports its data dir full (or
// not) and the feed derived the matching event.
func (s *scenario) waitDataDir(within time.Duration, node string, full bool, evs *eventLog) {
	s.t.Helper()
	reason := events.DataDirSpaceReturned
	if full {
		reason = events.DataDirFull
	}
	testwait.For(s.t, within, fmt.Sprintf("%s's data dir reported full=%v, with a %s event", node, full, reason), func() (bool, string) {
		n := &api.Node{}
		if err := s.st.Get(s.t.Context(), store.NodeKey(node), n); err != nil {
			return false, err.Error()
		}
		d := n.Status.DataDir
		return d != nil && d.Full == full && evs.has(reason, node), fmt.Sprintf("data dir %+v, event %v", d, evs.has(reason, node))
	})
}
