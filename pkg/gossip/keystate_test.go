package gossip

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeyGenerationPersisted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	token := []byte("token")
	if _, ok, err := loadKeyGeneration(dir, token); ok || err != nil {
		t.Fatalf("no file: ok %v, err %v", ok, err)
	}
	if err := saveKeyGeneration(dir, token, 5); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyStateFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, KeyStateFile))
	k, _ := DeriveKey(token, 5)
	if strings.Contains(string(b), string(k)) || !strings.Contains(string(b), `"keyGeneration":5`) {
		t.Fatalf("file %s", b)
	}
	if g, ok, err := loadKeyGeneration(dir, token); !ok || err != nil || g != 5 {
		t.Fatalf("load: %d %v %v", g, ok, err)
	}
	// Another token: the file is ignored, with the reason.
	if _, ok, err := loadKeyGeneration(dir, []byte("other")); ok || err == nil || !strings.Contains(err.Error(), "another token") {
		t.Fatalf("other token: ok %v, err %v", ok, err)
	}
	m, err := New(Config{Name: "n", Token: []byte("other"), DataDir: dir})
	if err != nil || m.KeyGeneration() != 0 {
		t.Fatalf("a member with another token starts at %d (%v), want 0", m.KeyGeneration(), err)
	}
	// A configured generation above the persisted one wins.
	m, _ = New(Config{Name: "n", Token: token, DataDir: dir, KeyGeneration: 7})
	if m.KeyGeneration() != 7 {
		t.Fatalf("generation %d, want 7", m.KeyGeneration())
	}
	if err := os.WriteFile(filepath.Join(dir, KeyStateFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := loadKeyGeneration(dir, token); ok || err == nil {
		t.Fatal("a corrupt file was used")
	}
}
