package gossip

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// LeaveTimeout bounds the graceful leave at the end of Run.
const LeaveTimeout = 5 * time.Second

// Run starts the member, joins (retrying with backoff until some member
// answers, then again whenever a seed is not alive, to heal partitions),
// records suspicion, and on ctx's end leaves the mesh and shuts down. A
// member that is alone joins through its seeds, the peers it last saw and
// its PeerSource (peers.go), so it rejoins when its seeds are gone. It
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
	bo := joinBackoff(c.ProbeInterval)
	poll := time.NewTicker(c.ProbeInterval / 2)
	defer poll.Stop()
	attempt, lastErr := 0, ""
	next := time.Now()
	// joined: a join answered since this member was last alone. Until then
	// it counts as alone even when gossip from others reached it (members
	// gossip to a dead peer's address for a while, so a restarted member
	// hears of them before any of them takes it for alive).
	joined := false
	for {
		if m.alone() {
			joined = false
		}
		if time.Now().After(next) && m.needsJoin(joined) {
			alone := !joined
			n, tried, err := m.joinKnown(ctx, alone)
			switch {
			case err != nil:
				if alone && err.Error() != lastErr {
					m.log.Warn("joining the mesh failed; retrying", "err", err)
				} else if !alone {
					// In the mesh, a seed gone for good is no news.
					m.log.Debug("a seed did not answer; in the mesh through others", "err", err)
				}
				lastErr = err.Error()
				next = time.Now().Add(bo.NextBackOff())
				attempt++
			case tried == 0:
				// Nobody to join through (a first member); checked again soon.
				next = time.Now().Add(5 * c.ProbeInterval)
			default:
				joined = true
				if alone || attempt > 0 {
					m.log.Info("joined the mesh", "answered", n, "alone_before", alone)
				}
				attempt, lastErr = 0, ""
				bo.Reset()
				// Checked again soon, but a join happens only when this
				// member is alone or a seed is not alive (a partition
				// healed, a seed restarted).
				next = time.Now().Add(5 * c.ProbeInterval)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
			m.poll()
			m.probeSuspects()
			m.rememberPeers()
		case <-m.rejoin:
			// The key generation changed (re-read from etcd), or a peer
			// source was set: a join that failed may succeed now.
			next, attempt = time.Now(), 0
			bo.Reset()
		}
	}
}

// joinBackoff is the delay between failed joins: the probe interval
// doubling up to 30 of them, every delay d drawn evenly from its upper
// half, (d/2, d] (cenkalti/backoff spreads an interval of 3d/4 by a third
// either way).
func joinBackoff(probe time.Duration) *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: probe * 3 / 4, RandomizationFactor: 1.0 / 3, Multiplier: 2, MaxInterval: 30 * probe * 3 / 4}
}

// needsJoin tells whether this member has not joined since it was last
// alone, or some seed is not alive.
func (m *Mesh) needsJoin(joined bool) bool {
	if _, err := m.memberlist(); err != nil {
		return false
	}
	return !joined || !m.tracker.seedsAlive(m.cfg.Seeds)
}

// alone tells whether memberlist knows no live member but this one.
func (m *Mesh) alone() bool {
	ml, err := m.memberlist()
	return err == nil && ml.NumMembers() <= 1
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
