package gossip

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/testwait"
)

func holdsKey(t *testing.T, m *Mesh, secret []byte, gen uint64) bool {
	t.Helper()
	want, err := DeriveKey(secret, gen)
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range m.keyring.GetKeys() {
		if bytes.Equal(k, want) {
			return true
		}
	}
	return false
}

// TestSecretSwitchWithoutRestart: members move to a new secret bound to
// generation 1 while running, keep the old secret's generation-0 key
// meanwhile, stay one mesh, rotate generations on the new secret as
// before, and a member holding only the old secret is refused.
func TestSecretSwitchWithoutRestart(t *testing.T) {
	old, next := []byte("test-token"), bytes.Repeat([]byte{7}, 32)
	dir := t.TempDir()
	a := startMember(t, Config{Name: "a", BindAddr: "127.0.0.60", DataDir: dir})
	b := startMember(t, Config{Name: "b", BindAddr: "127.0.0.61", Seeds: []string{a.Addr()}})
	c := startMember(t, Config{Name: "c", BindAddr: "127.0.0.62", Seeds: []string{a.Addr()}})
	allAlive := func() bool {
		for _, m := range []*member{a, b, c} {
			for _, p := range []string{"a", "b", "c"} {
				if stateOfPeer(m.Mesh, p) != Alive {
					return false
				}
			}
		}
		return true
	}
	testwait.True(t, 20*time.Second, "a, b, c alive", allAlive)

	for _, m := range []*member{a, b, c} {
		if err := m.SetKey(1, next); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []*member{a, b, c} {
		if m.KeyGeneration() != 1 || m.SecretGeneration() != 1 {
			t.Fatalf("%s: generation %d, secret generation %d; want 1 and 1", m.cfg.Name, m.KeyGeneration(), m.SecretGeneration())
		}
		// Generation 0 (members not yet switched) from the old secret,
		// 1 and 2 from the new one, nothing else.
		if !holdsKey(t, m.Mesh, old, 0) || !holdsKey(t, m.Mesh, next, 1) || !holdsKey(t, m.Mesh, next, 2) || holdsKey(t, m.Mesh, old, 1) {
			t.Fatalf("%s: keyring is not {old 0, new 1, new 2}", m.cfg.Name)
		}
	}
	testwait.True(t, 20*time.Second, "a, b, c alive on the new secret", allAlive)

	// Once the others switched, the old secret's key goes: a member with
	// the old secret alone is not even heard.
	for _, m := range []*member{a, b, c} {
		if !m.HoldsPreviousSecret() {
			t.Fatalf("%s dropped the previous secret by itself", m.cfg.Name)
		}
		if err := m.DropPreviousSecret(); err != nil {
			t.Fatal(err)
		}
		if m.HoldsPreviousSecret() || holdsKey(t, m.Mesh, old, 0) || !holdsKey(t, m.Mesh, next, 1) || m.KeyGeneration() != 1 {
			t.Fatalf("%s: after DropPreviousSecret, keyring still holds the old key or lost the new one", m.cfg.Name)
		}
	}
	if err := a.DropPreviousSecret(); err != nil {
		t.Fatalf("a second DropPreviousSecret: %v", err)
	}
	old0, _ := New(Config{Name: "old0", BindAddr: "127.0.0.63", Profile: ProfileFast, Token: old, Logger: logging.Test(t)})
	if err := old0.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := old0.Join([]string{a.Addr()}); !errors.Is(err, ErrJoin) {
		t.Fatalf("a member with the old secret at generation 0 joined: %v", err)
	}
	_ = old0.Shutdown()
	if _, seen := a.Node("old0"); seen {
		t.Fatal("a heard a member holding the old secret alone after dropping it")
	}
	testwait.True(t, 20*time.Second, "a, b, c alive after dropping the old secret", allAlive)

	// A generation rotation on the new secret keeps the usual overlap.
	if err := a.SetKeyGeneration(2); err != nil {
		t.Fatal(err)
	}
	if !holdsKey(t, a.Mesh, next, 1) || holdsKey(t, a.Mesh, old, 0) {
		t.Fatal("a at generation 2 should hold the new secret's generation 1 and no old key")
	}
	testwait.True(t, 20*time.Second, "b (generation 1) and a (generation 2) alive to each other", func() bool {
		return stateOfPeer(b.Mesh, "a") == Alive && stateOfPeer(a.Mesh, "b") == Alive
	})
	for _, m := range []*member{b, c} {
		if err := m.SetKeyGeneration(2); err != nil {
			t.Fatal(err)
		}
	}
	// The persisted generation now matches the new secret only.
	if g, ok, err := loadKeyGeneration(dir, next); err != nil || !ok || g != 2 {
		t.Fatalf("persisted generation with the new secret: %d, %v, %v", g, ok, err)
	}
	if _, ok, _ := loadKeyGeneration(dir, old); ok {
		t.Fatal("the persisted generation matches the old secret")
	}

	// Only the old secret: refused, at any generation it may guess.
	for _, gen := range []uint64{0, 1, 2} {
		stale, _ := New(Config{Name: "stale", BindAddr: "127.0.0.63", Profile: ProfileFast, Token: old, KeyGeneration: gen, Logger: logging.Test(t)})
		if err := stale.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := stale.Join([]string{a.Addr()}); !errors.Is(err, ErrJoin) {
			t.Fatalf("a member with the old secret at generation %d joined: %v", gen, err)
		}
		_ = stale.Shutdown()
	}
	// The new secret (what a joining machine gets): admitted.
	d := startMember(t, Config{Name: "d", BindAddr: "127.0.0.64", Token: next, KeyGeneration: 2, Seeds: []string{b.Addr()}})
	testwait.True(t, 20*time.Second, "d (new secret) alive to a", func() bool { return stateOfPeer(a.Mesh, "d") == Alive })
	testwait.True(t, 20*time.Second, "a, b, c still alive", allAlive)
	_ = d

	if err := (&Mesh{cfg: Config{Key: make([]byte, 32)}}).SetKey(1, next); !errors.Is(err, ErrStaticKey) {
		t.Fatalf("SetKey with a static key: %v", err)
	}
	if err := a.SetKey(3, nil); !errors.Is(err, ErrBadKey) {
		t.Fatalf("SetKey with an empty secret: %v", err)
	}
}

func TestSecretCheck(t *testing.T) {
	s := []byte("secret")
	if first, again := SecretCheck(s, 1), SecretCheck(s, 1); first != again || SecretCheck(s, 1) == SecretCheck(s, 2) || SecretCheck(s, 1) == SecretCheck([]byte("other"), 1) {
		t.Fatal("SecretCheck must be stable and depend on secret and generation")
	}
	if SecretCheck(nil, 1) != "" || len(SecretCheck(s, 1)) != 16 {
		t.Fatalf("SecretCheck: %q", SecretCheck(s, 1))
	}
}
