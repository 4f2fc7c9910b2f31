package token

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
)

func TestPrunable(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	grace := 24 * time.Hour
	tok := func(expires, revoked time.Time) *api.Token {
		t := api.NewToken("abc123")
		t.Spec.ExpiresAt, t.Status.RevokedAt = expires, revoked
		return t
	}
	var never time.Time
	for _, c := range []struct {
		name string
		tok  *api.Token
		want bool
	}{
		{"never expires, not revoked", tok(never, never), false},
		{"active", tok(now.Add(time.Hour), never), false},
		{"expired within the grace", tok(now.Add(-time.Hour), never), false},
		{"expired just under the grace ago", tok(now.Add(-grace+time.Second), never), false},
		{"expired exactly the grace ago", tok(now.Add(-grace), never), true},
		{"expired long ago", tok(now.Add(-30*24*time.Hour), never), true},
		{"revoked within the grace", tok(never, now.Add(-time.Hour)), false},
		{"revoked over the grace ago, never expires", tok(never, now.Add(-grace-time.Minute)), true},
		{"revoked recently, expired long ago", tok(now.Add(-30*24*time.Hour), now.Add(-time.Hour)), true},
		{"revoked long ago, still unexpired", tok(now.Add(time.Hour), now.Add(-48*time.Hour)), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Prunable(c.tok, now, grace); got != c.want {
				t.Fatalf("Prunable = %v, want %v", got, c.want)
			}
		})
	}
	if !Prunable(tok(now, never), now, 0) {
		t.Fatal("grace 0: a token expiring now is prunable")
	}
}

// TestPrune on real etcd: expired and revoked tokens past the grace go,
// leaving tombstones; the others stay; a pruned id cannot be registered
// again (the bootstrap machine's token file after a revocation); a token
// changed after it was read is left alone; pruning again does nothing.
func TestPrune(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := secretbox.NewKey()
	box, _ := secretbox.New(k)
	r := NewRegistry(secrets.New(st, box))
	ctx := context.Background()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	grace := 24 * time.Hour
	worker := []api.Role{api.RoleWorker}

	mk := func(ttl time.Duration, created time.Time) string {
		t.Helper()
		tok, _, err := r.Create(ctx, Spec{Roles: worker, TTL: ttl}, created)
		if err != nil {
			t.Fatal(err)
		}
		return tok.ID
	}
	active := mk(time.Hour, now)
	expiredRecently := mk(time.Hour, now.Add(-2*time.Hour))
	expiredLongAgo := mk(time.Hour, now.Add(-3*24*time.Hour))
	boot, _ := Generate()
	if _, err := r.Register(ctx, boot, Spec{Roles: AllRoles}, now.Add(-10*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Revoke(ctx, boot.ID, now.Add(-2*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	revokedRecently := mk(0, now.Add(-time.Hour))
	if _, err := r.Revoke(ctx, revokedRecently, now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}

	pruned, err := r.Prune(ctx, now, grace)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pruned)
	want := []string{expiredLongAgo, boot.ID}
	slices.Sort(want)
	if !slices.Equal(pruned, want) {
		t.Fatalf("pruned %v, want %v", pruned, want)
	}
	left, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tk := range left {
		ids = append(ids, tk.Metadata.Name)
	}
	slices.Sort(ids)
	keep := []string{active, expiredRecently, revokedRecently}
	slices.Sort(keep)
	if !slices.Equal(ids, keep) {
		t.Fatalf("left %v, want %v", ids, keep)
	}
	for _, id := range want {
		resp, err := st.Client().Get(ctx, store.TokenTombstoneKey(id))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("tombstone of %s: %v %v", id, resp, err)
		}
		if _, err := r.Get(ctx, id); !errors.Is(err, ErrUnknown) {
			t.Fatalf("pruned %s still readable: %v", id, err)
		}
	}
	// The revoked bootstrap token does not come back.
	if _, err := r.Register(ctx, boot, Spec{Roles: AllRoles}, now); !errors.Is(err, store.ErrExists) {
		t.Fatalf("registering a pruned id: %v, want store.ErrExists", err)
	}
	if _, err := r.Get(ctx, boot.ID); !errors.Is(err, ErrUnknown) {
		t.Fatalf("pruned bootstrap token: %v", err)
	}
	if again, err := r.Prune(ctx, now, grace); err != nil || len(again) != 0 {
		t.Fatalf("second pass: %v %v", again, err)
	}

	// A token changed after it was read (another endpoint recorded a use)
	// is not deleted by this pass.
	later := now.Add(2 * 24 * time.Hour)
	stale, err := r.Get(ctx, expiredRecently)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Used(ctx, expiredRecently, "w-1", now); err != nil {
		t.Fatal(err)
	}
	tomb := store.TokenTombstoneKey(expiredRecently)
	if err := r.s.DeleteUnchanged(ctx, stale); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("delete at a stale revision: %v", err)
	}
	if resp, _ := st.Client().Get(ctx, tomb); len(resp.Kvs) != 0 {
		t.Fatal("a tombstone without a deletion")
	}
	if pruned, err := r.Prune(ctx, later, grace); err != nil || !slices.Contains(pruned, expiredRecently) || !slices.Contains(pruned, revokedRecently) || len(pruned) != 3 { // active too: it expired 47h before later
		t.Fatalf("later pass: %v %v", pruned, err)
	}
	if _, err := r.Prune(ctx, now, -time.Second); err == nil {
		t.Fatal("a negative grace was accepted")
	}
}
