package gossip

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/homystack/nico/pkg/backoff"
)

// LeaveTimeout bounds the graceful leave at the end of Run.
const LeaveTimeout = 5 * time.Second

// Run starts the member, joins the seeds (retrying with backoff until one
// answers, then again whenever a seed is not alive, to heal partitions),
// records suspicion, and on ctx's end leaves the mesh and shuts down. It
// returns nil after a clean stop, or the start error.
func (m *Mesh) Run(ctx context.Context) error {
	if err := m.Start(); err != nil {
		return err
	}
	defer func() {
		if err := m.Leave(LeaveTimeout); err != nil {
			m.log.Warn("gossip leave failed", "err", err)
		}
		_ = m.Shutdown()
	}()
	c := m.memberlistConfig()
	bo := backoff.Backoff{Base: c.ProbeInterval, Max: 30 * c.ProbeInterval, Jitter: 0.5}
	poll := time.NewTicker(c.ProbeInterval / 2)
	defer poll.Stop()
	attempt, lastErr := 0, ""
	next := time.Now()
	for {
		if time.Now().After(next) && len(m.cfg.Seeds) > 0 && m.needsJoin() {
			if n, err := m.Join(m.cfg.Seeds); err != nil {
				if err.Error() != lastErr {
					m.log.Warn("joining the mesh failed; retrying", "err", err)
					lastErr = err.Error()
				}
				next = time.Now().Add(bo.Delay(attempt))
				attempt++
			} else {
				if attempt > 0 || lastErr != "" || n > 0 {
					m.log.Info("joined the mesh", "seeds_answered", n)
				}
				attempt, lastErr = 0, ""
				// Checked again soon, but a join happens only when a seed
				// is not alive (a partition healed, a seed restarted).
				next = time.Now().Add(5 * c.ProbeInterval)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
			m.poll()
			m.probeSuspects()
		case <-m.rejoin:
			// The key generation changed (re-read from etcd): a join that
			// failed on keys may succeed now.
			next, attempt = time.Now(), 0
		}
	}
}

// needsJoin tells whether this member is alone or some seed is not alive.
func (m *Mesh) needsJoin() bool {
	ml, err := m.memberlist()
	if err != nil {
		return false
	}
	if ml.NumMembers() <= 1 {
		return true
	}
	return !m.tracker.seedsAlive(m.cfg.Seeds)
}

// IsJoinError tells whether err is a failure to join.
func IsJoinError(err error) bool { return errors.Is(err, ErrJoin) }

// Background starts m (binding its port now, so a port in use fails here)
// and runs it until ctx ends or stop is called; stop returns once the mesh
// has been left.
func Background(ctx context.Context, m *Mesh, log *slog.Logger) (stop func(), err error) {
	if err := m.Start(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := m.Run(ctx); err != nil {
			log.Error("gossip stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}
