package ctl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/token"
)

// TestTokenListShowsExpired: a token that expired but is not pruned yet
// (token.DefaultPruneAfter) is listed, marked expired; a pruned one is
// not listed.
func TestTokenListShowsExpired(t *testing.T) {
	c := etcdtest.Start(t, 1)
	keyFile := filepath.Join(t.TempDir(), "secrets.key")
	k, _ := secretbox.NewKey()
	if err := os.WriteFile(keyFile, k, 0o600); err != nil {
		t.Fatal(err)
	}
	box, _ := secretbox.New(k)
	st, err := store.New(c.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	reg := token.NewRegistry(secrets.New(st, box))
	ctx := context.Background()
	now := time.Now()
	spec := token.Spec{Roles: []api.Role{api.RoleWorker}, TTL: time.Hour}
	recent, _, err := reg.Create(ctx, spec, now.Add(-2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	old, _, err := reg.Create(ctx, spec, now.Add(-3*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	list := func() string {
		r := run(t, c.Endpoints(), "--secrets.keyFile", keyFile, "token", "list")
		r.want(t, 0, []string{recent.ID}, nil)
		return r.stdout
	}
	out := list()
	for _, id := range []string{recent.ID, old.ID} {
		if !lineHas(out, id, "expired") {
			t.Fatalf("token %s not listed as expired:\n%s", id, out)
		}
	}
	if _, err := reg.Prune(ctx, now, token.DefaultPruneAfter); err != nil {
		t.Fatal(err)
	}
	out = list()
	if !lineHas(out, recent.ID, "expired") || strings.Contains(out, old.ID) {
		t.Fatalf("after pruning:\n%s", out)
	}
}

// lineHas tells whether a line of out holds every one of words.
func lineHas(out string, words ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			return true
		}
	}
	return false
}
