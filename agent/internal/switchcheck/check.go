// Package switchcheck is the client side of the switch guard: the
// pre-switch check a control-plane host runs before
// switch-to-configuration activates a new generation (nico-agent
// switch-check, from the NixOS module's system.preSwitchChecks). It asks
// the coordinator's leader for the switch slot through the host's
// SwitchRequest and waits for the answer (pkg/switchguard), printing its
// progress.
//
//	override (NICO_SWITCH_GUARD=off) ---------------------------------> proceed
//	boot, dry-activate, check; no controlPlane role; same toplevel;
//	no etcd member's data on this host --------------------------------> proceed
//	the new generation's etcd has another minor version -------------> refuse (EtcdCluster spec.version)
//	no etcd endpoint answers ------------------------------------------> refuse
//	the request's write fails by AnswerTimeout (a failure that passes
//	by itself, as a leader moving, is written again until then) -------> refuse
//	ask (a new attempt) --> Granted --> proceed
//	                    --> Refused --> refuse (the leader's reason)
//	                    --> no answer within AnswerTimeout: a member here --> refuse, none --> proceed
//	                    --> still Waiting at Wait ---------------------> fail (the last reason)
//
// A refused, failed or interrupted ask is withdrawn (its request deleted,
// unless it was granted meanwhile), so that no slot is granted later to a
// switch that did not happen.
package switchcheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/etcdversion"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/switchguard"
	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Exit statuses of the check.
const (
	Proceed = 0 // switch
	Failed  = 1 // no answer in time, or an error: do not switch
	Usage   = 2 // bad flags or configuration
	Refused = 3 // the slot was refused, or the check refuses the switch
)

// Defaults of the check's bounds.
const (
	DefaultWait          = 15 * time.Minute
	DefaultAnswerTimeout = 30 * time.Second
)

// Check is one pre-switch check of one host.
type Check struct {
	// Node is this host's name; ControlPlane whether it has the role;
	// PeerURL its etcd member's peer URL.
	Node         string
	ControlPlane bool
	PeerURL      string
	// Toplevel and Action are switch-to-configuration's arguments to the
	// check: the new generation and what it does with it.
	Toplevel, Action string
	// CurrentSystem is the link to the running generation.
	CurrentSystem string
	// Override: switch without asking (NICO_SWITCH_GUARD=off).
	Override bool
	// Wait bounds the wait for the slot, AnswerTimeout the wait for a
	// first answer; Hold is the request's hold once granted.
	Wait, AnswerTimeout, Hold time.Duration
	// CurrentEtcd and NewEtcd are the etcd binaries the running and the
	// new generation run ("": unknown); EtcdVersion asks one its version.
	CurrentEtcd, NewEtcd string
	EtcdVersion          func(ctx context.Context, binary string) (string, error)
	// Store is nico's store; when nil, Dial makes it, once the check
	// needs it (nil, or an error: no etcd endpoint answered).
	Store *store.Store
	Dial  func(ctx context.Context) (*store.Store, error)
	// LocalMember tells whether this host keeps an etcd member's data.
	LocalMember func() bool
	Clock       clockwork.Clock
	Out         io.Writer
}

func (c *Check) say(format string, args ...any) {
	fmt.Fprintf(c.Out, "nico switch guard: "+format+"\n", args...)
}

// Run runs the check and returns its exit status.
func (c *Check) Run(ctx context.Context) int {
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Override {
		c.say("%s is set: %s switches without the switch slot; etcd's quorum is not guarded", switchguard.Override, c.Node)
		return Proceed
	}
	if !slices.Contains([]string{"switch", "test"}, c.Action) {
		c.say("%q restarts nothing now: no slot needed", c.Action)
		return Proceed
	}
	if !c.ControlPlane {
		c.say("%s has no controlPlane role: no etcd member to guard", c.Node)
		return Proceed
	}
	if cur, err := filepath.EvalSymlinks(c.CurrentSystem); err == nil && cur == c.Toplevel {
		c.say("%s already runs %s: no slot needed", c.Node, c.Toplevel)
		return Proceed
	}
	if c.LocalMember != nil && !c.LocalMember() {
		// No member's data: no member runs here to restart (a host
		// enabling nico, a standby, a host before its learner starts).
		c.say("%s keeps no etcd member's data: no member to guard", c.Node)
		return Proceed
	}
	if code, done := c.checkEtcdVersion(ctx); done {
		return code
	}
	if c.Store == nil && c.Dial != nil {
		st, err := c.Dial(ctx)
		if err != nil {
			return c.blind(ctx, fmt.Sprintf("no etcd endpoint answered (%v)", err))
		}
		c.Store = st
	}
	if c.Store == nil {
		return c.blind(ctx, "no etcd endpoint answered")
	}
	return c.ask(ctx)
}

// checkEtcdVersion refuses a generation whose etcd has another minor
// version than the running one's.
func (c *Check) checkEtcdVersion(ctx context.Context) (int, bool) {
	if c.CurrentEtcd == "" || c.NewEtcd == "" || c.CurrentEtcd == c.NewEtcd || c.EtcdVersion == nil {
		return 0, false
	}
	from, err := c.EtcdVersion(ctx, c.CurrentEtcd)
	if err != nil {
		c.say("cannot tell the running etcd's version (%v); its minor version is not checked", err)
		return 0, false
	}
	to, err := c.EtcdVersion(ctx, c.NewEtcd)
	if err != nil {
		c.say("cannot tell the new generation's etcd version (%v); refusing: a live switch must not change etcd's minor version unseen", err)
		return Refused, true
	}
	fv, ferr := etcdversion.Parse(from)
	tv, terr := etcdversion.Parse(to)
	if ferr != nil || terr != nil || fv.MinorString() == tv.MinorString() {
		return 0, false
	}
	c.say("refused: the new generation runs etcd %s, this host runs %s. A live switch would change etcd's minor version on this member alone. "+
		"Roll etcd with the EtcdCluster's spec.version (nicoctl apply: one member at a time, the leader last, downgrades enabled first), "+
		"then switch; or boot into it (nixos-rebuild boot), or override with %s", to, from, switchguard.Override)
	return Refused, true
}

// blind decides when no coordinator (or no etcd) answers: a host that
// keeps an etcd member does not switch blind.
func (c *Check) blind(ctx context.Context, why string) int {
	member, known := c.hasMember(ctx)
	if known && !member {
		c.say("%s; %s runs no etcd member: switching", why, c.Node)
		return Proceed
	}
	c.say("refused: %s, and %s runs an etcd member: switching blind could restart it while another member is down and cost etcd its quorum. "+
		"Start a coordinator (nico-coordinator on a control-plane host) or bring etcd back; or, knowing the cluster can lose this member now, switch with %s", why, c.Node, switchguard.Override)
	return Refused
}

// hasMember tells whether this host runs an etcd member, from etcd's
// member list when it answers, else from the local data dir; known is
// false when neither tells.
func (c *Check) hasMember(ctx context.Context) (member, known bool) {
	if c.Store != nil && c.PeerURL != "" {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := c.Store.Client().MemberList(lctx)
		if err == nil {
			for _, m := range resp.Members {
				if slices.Contains(m.PeerURLs, c.PeerURL) {
					return true, true
				}
			}
			return false, true
		}
	}
	if c.LocalMember != nil {
		return c.LocalMember(), true
	}
	return false, false
}

// ask files a new attempt and waits for its answer.
func (c *Check) ask(ctx context.Context) int {
	key := store.SwitchKey(c.Node)
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	now := c.Clock.Now()
	r := api.NewSwitchRequest(c.Node)
	r.Metadata.CreatedAt = now
	r.Spec = api.SwitchRequestSpec{Attempt: now.UTC().Format("20060102t150405") + "-" + hex.EncodeToString(b), Toplevel: c.Toplevel, Action: c.Action, Hold: api.Duration(c.Hold), RequestedAt: now}
	if err := c.file(ctx, key, r); err != nil {
		return c.blind(ctx, fmt.Sprintf("the request could not be written (%v)", err))
	}
	c.say("%s asks for the switch slot to switch to %s (attempt %s)", c.Node, c.Toplevel, r.Spec.Attempt)
	start := c.Clock.Now()
	answerBy, deadline := c.Clock.After(c.AnswerTimeout), c.Clock.After(c.Wait)
	last, rev := "", int64(0)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w := c.Store.Watch(wctx, key, 0)
	for {
		cur := &api.SwitchRequest{}
		err := c.Store.Get(ctx, key, cur)
		switch {
		case errors.Is(err, store.ErrNotFound):
			c.say("the request was deleted meanwhile; not switching")
			return Failed
		case err != nil:
			c.say("reading the request: %v", err)
		case cur.Spec.Attempt != r.Spec.Attempt:
			c.say("another check of %s asked meanwhile (attempt %s); not switching", c.Node, cur.Spec.Attempt)
			return Failed
		case cur.Answered():
			rev = cur.Metadata.Revision
			answerBy = nil
			if msg := string(cur.Status.Phase) + ": " + cur.Status.Message; msg != last {
				last = msg
				c.say("%s after %s: %s", cur.Status.Phase, c.Clock.Since(start).Round(time.Second), cur.Status.Message)
			}
			switch cur.Status.Phase {
			case api.SwitchGranted:
				if !cur.Status.Deadline.IsZero() {
					c.say("granted until %s: switching", cur.Status.Deadline.Format(time.RFC3339))
				}
				return Proceed
			case api.SwitchRefused:
				c.say("refused: switch again once the reason is gone, or switch with %s accepting what the reason says", switchguard.Override)
				c.withdraw(rev)
				return Refused
			case api.SwitchWaiting:
			default:
				c.say("the slot was %s before this host switched; not switching", cur.Status.Phase)
				return Failed
			}
		default:
			rev = cur.Metadata.Revision
		}
		select {
		case _, ok := <-w:
			if !ok {
				w = c.Store.Watch(wctx, key, 0)
			}
		case <-answerBy:
			if c.giveUp(r.Spec.Attempt) {
				c.say("granted as the wait ended: switching")
				return Proceed
			}
			return c.blind(ctx, fmt.Sprintf("no coordinator answered within %s", c.AnswerTimeout))
		case <-deadline:
			if c.giveUp(r.Spec.Attempt) {
				c.say("granted as the wait ended: switching")
				return Proceed
			}
			c.say("still waiting after %s (%s): not switching. Wait and switch again, or switch with %s accepting the risk", c.Wait, last, switchguard.Override)
			return Failed
		case <-ctx.Done():
			if c.giveUp(r.Spec.Attempt) {
				c.say("interrupted, but the slot was granted meanwhile: the leader takes it back at its hold")
			}
			c.say("interrupted: not switching")
			return Failed
		}
	}
}

// retryWrite is the wait before the request is written again.
const retryWrite = time.Second

// file writes the request r at key within AnswerTimeout. A write that
// failed in a way that passes by itself (etcd's leader moving or a member
// restarting, as while another host switches; a request timed out or
// whose answer was lost) is made again, every retryWrite. Each write is
// guarded on the key as it was read just before, and a read that finds
// r's attempt there ends the writes: a write whose answer was lost but
// which took effect is found, not repeated, and an answer the leader
// wrote meanwhile is never overwritten.
func (c *Check) file(ctx context.Context, key string, r *api.SwitchRequest) error {
	fctx, cancel := context.WithTimeout(ctx, c.AnswerTimeout)
	defer cancel()
	for {
		err := c.fileOnce(fctx, key, r)
		if err == nil || !(errors.Is(err, store.ErrConflict) || etcdadmin.Transient(err)) || fctx.Err() != nil {
			return err
		}
		c.say("writing the request: %v; writing it again", err)
		select {
		case <-c.Clock.After(retryWrite):
		case <-fctx.Done():
			return err
		}
	}
}

// fileOnce reads key and writes r there unless it holds r's attempt
// already, guarded on the key being as read.
func (c *Check) fileOnce(ctx context.Context, key string, r *api.SwitchRequest) error {
	cur := &api.SwitchRequest{}
	rev := int64(0)
	switch err := c.Store.Get(ctx, key, cur); {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return err
	case cur.Spec.Attempt == r.Spec.Attempt:
		return nil
	default:
		rev = cur.Metadata.Revision
	}
	put, err := store.PutOp(key, r)
	if err != nil {
		return err
	}
	_, err = c.Store.Txn(ctx, []clientv3.Cmp{store.Unchanged(key, rev)}, put)
	return err
}

// giveUp withdraws the ask; it reports a grant that came meanwhile, which
// it keeps.
func (c *Check) giveUp(attempt string) (granted bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 5 {
		cur := &api.SwitchRequest{}
		if err := c.Store.Get(ctx, store.SwitchKey(c.Node), cur); err != nil || cur.Spec.Attempt != attempt {
			return false
		}
		if cur.Answered() && cur.Status.Phase == api.SwitchGranted {
			return true
		}
		if c.withdraw(cur.Metadata.Revision) {
			return false
		}
	}
	return false
}

// withdraw deletes the request while it is still as last read; false when
// it changed meanwhile (the caller reads it again).
func (c *Check) withdraw(rev int64) bool {
	if rev == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	key := store.SwitchKey(c.Node)
	_, err := c.Store.Txn(ctx, []clientv3.Cmp{store.Unchanged(key, rev)}, store.DeleteOp(key))
	return !errors.Is(err, store.ErrConflict)
}
