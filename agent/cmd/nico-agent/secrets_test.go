package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
)

// TestBoundSecrets: before the agent connects the appliers read
// generations.secretsDir; after, the machine's projected secrets, with
// those files still answering for names not projected.
func TestBoundSecrets(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "git"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "git", "password"), []byte("pw"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := newBoundSecrets("m1", pki.Dir(t.TempDir()), apply.DirSecrets(dir))
	if s, err := b.Secret(t.Context(), "git"); err != nil || string(s["password"]) != "pw" {
		t.Fatalf("before connecting: %v, %v", s, err)
	}
	st, err := store.New(etcdtest.NewClient(t, etcdtest.Start(t, 1).Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	b.bind(st)
	if s, err := b.Secret(t.Context(), "git"); err != nil || string(s["password"]) != "pw" {
		t.Fatalf("after connecting, a name not projected: %v, %v", s, err)
	}
}
