package faults

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/failpoint"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// pauseDir is where paused failpoints mark themselves reached and wait
// for their release file.
func (c *cluster) pauseDir() string {
	d := filepath.Join(c.dir, "failpoints")
	if err := os.MkdirAll(d, 0o755); err != nil {
		c.t.Fatal(err)
	}
	return d
}

// pauseEnv arms point in pause mode: the process's first hit blocks until
// release(point).
func (c *cluster) pauseEnv(point string) []string {
	return []string{failpoint.Env + "=" + point + ":" + failpoint.ModePause, failpoint.EnvDir + "=" + c.pauseDir()}
}

// waitReached waits until a process paused at point.
func (c *cluster) waitReached(point string, within time.Duration) {
	c.t.Helper()
	testwait.True(c.t, within, point+" reached", func() bool {
		_, err := os.Stat(failpoint.ReachedFile(c.pauseDir(), point))
		return err == nil
	})
}

// release lets every process paused at point go on (and those reaching it
// later pass).
func (c *cluster) release(point string) {
	c.t.Helper()
	if err := os.WriteFile(failpoint.ReleaseFile(c.pauseDir(), point), nil, 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// poll reports whether cond held within d (false after d: the caller goes
// on either way).
func poll(d time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// logJournal logs the history of every operation of type typ (the
// coordinator's reasons, for a scenario that states what nico did).
func (s *scenario) logJournal(typ api.OpType) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ops, _, err := store.List[api.Operation](ctx, s.st, store.OpsDir)
	if err != nil {
		s.t.Logf("journal: %v", err)
		return
	}
	for _, op := range ops {
		if op.Spec.Type != typ {
			continue
		}
		for _, e := range op.Status.History {
			s.t.Logf("journal %s %s: %s %s [%s] %s", op.Metadata.Name, op.Spec.Node, e.At.Format("15:04:05.000"), e.Step, e.Leader, e.Message)
		}
	}
}
