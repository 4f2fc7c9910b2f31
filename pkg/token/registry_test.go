package token

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
)

func TestRegistry(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := secretbox.NewKey()
	box, _ := secretbox.New(k)
	r := NewRegistry(secrets.New(st, box))
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	tok, obj, err := r.Create(ctx, Spec{Roles: []api.Role{api.RoleWorker}, TTL: time.Hour, Description: "d"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if obj.Spec.Secret != tok.Secret || !obj.Spec.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("created %+v", obj)
	}
	boot, _ := Generate()
	if _, err := r.Register(ctx, boot, Spec{Roles: AllRoles}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Register(ctx, boot, Spec{Roles: AllRoles}, now); !errors.Is(err, store.ErrExists) {
		t.Fatalf("register twice: %v", err)
	}
	if _, err := r.Register(ctx, Token{ID: "zzzzzz", Secret: boot.Secret}, Spec{}, now); err == nil {
		t.Fatal("a token without roles was registered")
	}
	got, err := r.Get(ctx, tok.ID)
	if err != nil || Check(got, now, []api.Role{api.RoleWorker}) != nil {
		t.Fatalf("get: %+v %v", got, err)
	}
	if err := r.Used(ctx, tok.ID, "w-1", now); err != nil {
		t.Fatal(err)
	}
	if got, _ = r.Get(ctx, tok.ID); got.Status.Uses != 1 || got.Status.LastUsedBy != "w-1" {
		t.Fatalf("after use: %+v", got.Status)
	}
	if _, err := r.Revoke(ctx, tok.ID, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Revoke(ctx, tok.ID, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, _ = r.Get(ctx, tok.ID)
	if !got.Status.RevokedAt.Equal(now.Add(time.Minute)) || !errors.Is(Check(got, now, nil), ErrRevoked) {
		t.Fatalf("after revoke: %+v", got.Status)
	}
	all, err := r.List(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("list: %v %v", all, err)
	}
	for _, id := range []string{"nope00", "bad id", ""} {
		if _, err := r.Get(ctx, id); !errors.Is(err, ErrUnknown) {
			t.Fatalf("get %q: %v", id, err)
		}
		if _, err := r.Revoke(ctx, id, now); !errors.Is(err, ErrUnknown) {
			t.Fatalf("revoke %q: %v", id, err)
		}
	}
}
