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
	for _, short := range [][]byte{nil, {2}, {1}, {2, sealed[1], 0}, {1, sealed[1], 0}, {9, sealed[1]}} {
		if _, err := b.Open("x", short); !errors.Is(err, ErrOpen) {
			t.Fatalf("Open(%v) = %v", short, err)
		}
	}
}

func TestKeyRotation(t *testing.T) {
	old, oldKey := newBox(t)
	sealed, _ := old.Seal("k", []byte("v"))
	other, newKey := newBox(t)
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
	if id := KeyID(newKey); !bytes.Equal(resealed[1:1+IDSize], id[:]) {
		t.Fatal("a rotating box seals with its first key")
	}
	if _, err := New([]byte("short")); !errors.Is(err, ErrKeyFile) {
		t.Fatalf("short key: %v", err)
	}
}

// collidingKeys returns two different keys whose one-byte (layout 1) ids
// are equal, as one rotation in 256 gives.
func collidingKeys(t *testing.T) (a, b []byte) {
	t.Helper()
	first, _ := NewKey()
	want := KeyID(first)[0]
	for range 1 << 16 {
		k, _ := NewKey()
		if id := KeyID(k); id[0] == want {
			return first, k
		}
	}
	t.Fatal("no colliding key in 65536 tries")
	return nil, nil
}

// sealV1 writes a value in layout 1 (a one-byte key id), as earlier
// builds did.
func sealV1(t *testing.T, key []byte, name string, plaintext []byte) []byte {
	t.Helper()
	b, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := b.Seal(name, plaintext)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte{versionV1, v2[1]}, v2[1+IDSize:]...)
}

func TestCollidingKeyIDsKeepEveryValueReadable(t *testing.T) {
	oldKey, newKey := collidingKeys(t)
	// Layout 1 values of both keys carry the same id byte; a box with both
	// keys opens each (before, the second key replaced the first).
	oldV1 := sealV1(t, oldKey, "k", []byte("old"))
	newV1 := sealV1(t, newKey, "k", []byte("new"))
	both, err := New(newKey, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	for sealed, want := range map[string]string{string(oldV1): "old", string(newV1): "new"} {
		if pt, err := both.Open("k", []byte(sealed)); err != nil || string(pt) != want {
			t.Fatalf("layout 1 value %q: %q, %v", want, pt, err)
		}
	}
	// Current layout: force a full id collision; both still open.
	real := keyID
	t.Cleanup(func() { keyID = real })
	keyID = func([]byte) [IDSize]byte { return [IDSize]byte{7} }
	oldBox, _ := New(oldKey)
	newBox, _ := New(newKey)
	oldV2, _ := oldBox.Seal("k", []byte("old"))
	newV2, _ := newBox.Seal("k", []byte("new"))
	both, _ = New(newKey, oldKey)
	for sealed, want := range map[string]string{string(oldV2): "old", string(newV2): "new"} {
		if pt, err := both.Open("k", []byte(sealed)); err != nil || string(pt) != want {
			t.Fatalf("colliding id, value %q: %q, %v", want, pt, err)
		}
	}
	// A colliding id of a key the box lacks is a failed open, not a match.
	if _, err := newBox.Open("k", oldV2); !errors.Is(err, ErrOpen) {
		t.Fatalf("the other key's value opened: %v", err)
	}
}

func TestSameKeyTwiceIsKeptOnce(t *testing.T) {
	k, _ := NewKey()
	b, err := New(k, k)
	if err != nil || len(b.keys) != 1 {
		t.Fatalf("New(k, k): %d keys, %v", len(b.keys), err)
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
