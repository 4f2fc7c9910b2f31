package secrets

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/store"
)

func TestSealedInEtcd(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := secretbox.NewKey()
	box, _ := secretbox.New(key)
	s := New(st, box)
	ctx := context.Background()

	tok := api.NewToken("abc123")
	tok.Spec.Secret = "0123456789abcdef"
	tok.Spec.Roles = []api.Role{api.RoleWorker}
	tok.Spec.Description = "rack 4 workers"
	tok.Metadata.CreatedAt = time.Now().UTC().Truncate(time.Second)
	if err := s.Create(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, tok); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second create: %v", err)
	}

	// A plain etcd client sees ciphertext only.
	raw, err := cl.Client(t).Get(ctx, store.DefaultPrefix+store.TokenKey("abc123"))
	if err != nil || len(raw.Kvs) != 1 {
		t.Fatalf("raw get: %v %v", raw, err)
	}
	v := raw.Kvs[0].Value
	for _, clear := range []string{"0123456789abcdef", "rack 4", "Token", "worker", "abc123", "apiVersion"} {
		if bytes.Contains(v, []byte(clear)) {
			t.Fatalf("raw value shows %q", clear)
		}
	}

	got := api.NewToken("")
	if err := s.Get(ctx, store.TokenKey("abc123"), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Secret != tok.Spec.Secret || got.Spec.Description != tok.Spec.Description || got.Metadata.Revision == 0 {
		t.Fatalf("read back %+v", got)
	}
	// Compare-and-swap.
	stale := *got
	got.Status.Uses++
	if err := s.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, &stale); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale update: %v", err)
	}

	// Copying the sealed value to another key does not open it.
	if _, err := cl.Client(t).Put(ctx, store.DefaultPrefix+store.TokenKey("zzz999"), string(v)); err != nil {
		t.Fatal(err)
	}
	if err := s.Get(ctx, store.TokenKey("zzz999"), api.NewToken("")); !errors.Is(err, secretbox.ErrOpen) {
		t.Fatalf("moved value: %v", err)
	}
	if err := s.Delete(ctx, store.TokenKey("zzz999")); err != nil {
		t.Fatal(err)
	}

	if err := s.Put(ctx, api.NewToken("def456")); err != nil {
		t.Fatal(err)
	}
	all, _, err := List[api.Token](ctx, s, store.TokensDir)
	if err != nil || len(all) != 2 || all[0].Metadata.Name != "abc123" || all[1].Metadata.Name != "def456" || all[0].Status.Uses != 1 {
		t.Fatalf("list: %v %v", all, err)
	}

	// Another secrets key cannot read them.
	other, _ := secretbox.NewKey()
	obox, _ := secretbox.New(other)
	if err := New(st, obox).Get(ctx, store.TokenKey("abc123"), api.NewToken("")); err == nil {
		t.Fatal("another key read the token")
	}
	if err := s.Put(ctx, api.NewNode("x")); !errors.Is(err, ErrNotSecret) {
		t.Fatalf("put outside secrets/: %v", err)
	}
	if err := s.Get(ctx, store.TokenKey("none00"), api.NewToken("")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}
