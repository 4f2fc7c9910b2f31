package gossipkey

import (
	"context"
	"log/slog"
	"time"

	"github.com/homystack/nico/pkg/store"
)

// Follower is one pass of Follow, or of FollowSecret when Secret is set,
// for a controller that runs it on a watch of store.GossipKeyKey and a
// resync tick of Interval (the agent's). Its zero value is not usable:
// set St, M, Interval and Log.
type Follower struct {
	St *store.Store
	M  Keyring
	// Secret, when set, is who the member is: the secret is followed too
	// (M must then be a SecretKeyring).
	Secret *Member
	// Interval is the resync tick's; the replaced secret is dropped
	// SecretOverlap intervals after a switch.
	Interval time.Duration
	Log      *slog.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time

	last   string    // the last failure to install the secret, logged once
	dropAt time.Time // when to drop the replaced secret; zero: none held
}

// Once installs the stored generation (and secret) on the member. It
// returns an error only when the stored key cannot be read; a secret that
// cannot be installed is logged, once per distinct failure (the secret
// never is), since only an operator can mend it.
func (f *Follower) Once(ctx context.Context) error {
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	skr, withSecret := f.M.(SecretKeyring)
	withSecret = withSecret && f.Secret != nil
	if withSecret && !f.dropAt.IsZero() && !now().Before(f.dropAt) {
		if err := skr.DropPreviousSecret(); err != nil {
			f.Log.Warn("dropping the previous gossip secret failed", "err", err)
		}
		f.dropAt = time.Time{}
	}
	k, err := Current(ctx, f.St)
	if err != nil {
		return err
	}
	if withSecret {
		switched, err := followSecret(ctx, f.St, skr, *f.Secret, k.Spec)
		if switched {
			f.dropAt = now().Add(SecretOverlap * f.Interval)
		}
		switch {
		case err != nil && err.Error() != f.last:
			f.Log.Warn("cannot install the current gossip secret; run nicoctl gossip rotate-key --new-secret again, or join this machine again", "node", f.Secret.Name, "secret_generation", k.Spec.SecretGeneration, "err", err)
			f.last = err.Error()
		case err == nil:
			f.last = ""
		}
	}
	installGeneration(f.M, k.Spec.Generation, f.Log)
	return nil
}

// every runs Once, then every Interval, until ctx ends.
func (f *Follower) every(ctx context.Context) {
	t := time.NewTicker(f.Interval)
	defer t.Stop()
	for {
		_ = f.Once(ctx) // a store that cannot be read is tried again at the next tick
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
