package secretbox

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newBox(t *testing.T) (*Box, []byte) {
	t.Helper()
	k, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(k)
	if err != nil {
		t.Fatal(err)
	}
	return b, k
}

func TestSealOpen(t *testing.T) {
	b, _ := newBox(t)
	secret := []byte("the secret value")
	sealed, err := b.Seal("secrets/tokens/abc123", secret)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, secret) {
		t.Fatal("sealed value holds the plaintext")
	}
	again, _ := b.Seal("secrets/tokens/abc123", secret)
	if bytes.Equal(again, sealed) {
		t.Fatal("two seals of one value are equal (nonce reused)")
	}
	pt, err := b.Open("secrets/tokens/abc123", sealed)
	if err != nil || !bytes.Equal(pt, secret) {
		t.Fatalf("open: %q, %v", pt, err)
	}
	// Moved to another key: refused.
	if _, err := b.Open("secrets/tokens/zzz999", sealed); !errors.Is(err, ErrOpen) {
		t.Fatalf("moved value opened: %v", err)
	}
	// Damaged: refused.
	bad := bytes.Clone(sealed)
	bad[len(bad)-1] ^= 1
	if _, err := b.Open("secrets/tokens/abc123", bad); !errors.Is(err, ErrOpen) {
		t.Fatalf("damaged value opened: %v", err)
	}
	for _, short := range [][]byte{nil, {1}, {1, sealed[1], 0}, {9, sealed[1]}} {
		if _, err := b.Open("x", short); !errors.Is(err, ErrOpen) {
			t.Fatalf("Open(%v) = %v", short, err)
		}
	}
}

func TestKeyRotation(t *testing.T) {
	old, oldKey := newBox(t)
	sealed, _ := old.Seal("k", []byte("v"))
	other, newKey := newBox(t)
	if KeyID(oldKey) == KeyID(newKey) {
		t.Skip("the two random keys share an id (1 in 256)")
	}
	if _, err := other.Open("k", sealed); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("another key opened it: %v", err)
	}
	both, err := New(newKey, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := both.Open("k", sealed); err != nil || string(pt) != "v" {
		t.Fatalf("rotating box: %q, %v", pt, err)
	}
	resealed, _ := both.Seal("k", []byte("v"))
	if resealed[1] != KeyID(newKey) {
		t.Fatal("a rotating box seals with its first key")
	}
	if _, err := New([]byte("short")); !errors.Is(err, ErrKeyFile) {
		t.Fatalf("short key: %v", err)
	}
}

func TestLoadRefusesReadableKeyFiles(t *testing.T) {
	dir := t.TempDir()
	k, _ := NewKey()
	path := filepath.Join(dir, "secrets.key")
	if err := os.WriteFile(path, k, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o644, 0o604, 0o640} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if !errors.Is(err, ErrKeyFile) || !strings.Contains(err.Error(), "chmod 600") {
			t.Fatalf("mode %o: %v", mode, err)
		}
	}
	if err := os.WriteFile(path+"2", k[:10], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path + "2"); !errors.Is(err, ErrKeyFile) {
		t.Fatalf("short key file: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "none")); err == nil {
		t.Fatal("missing key file loaded")
	}
}
