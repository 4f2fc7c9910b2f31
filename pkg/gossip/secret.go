package gossip

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// secrets are what a member's keys derive from: generations since and
// later from cur, earlier ones from prev (the secret cur replaced; nil:
// cur too). A member keeps prev so that, across a change of secret, it
// still holds the key of generation since-1 that members not yet switched
// encrypt with.
type secrets struct {
	since     uint64
	cur, prev []byte
}

// of is the secret of generation gen.
func (s secrets) of(gen uint64) []byte {
	if gen < s.since && s.prev != nil {
		return s.prev
	}
	return s.cur
}

func (s secrets) same(o secrets) bool {
	return s.since == o.since && bytes.Equal(s.cur, o.cur) && bytes.Equal(s.prev, o.prev)
}

// SecretCheck is a fingerprint of secret as the secret of generation gen:
// the first 8 bytes of SHA-256 of the key derived for gen, in hex. It
// tells whether two members hold the same secret and reveals nothing of
// it ("" for an empty secret).
func SecretCheck(secret []byte, gen uint64) string {
	k, err := DeriveKey(secret, gen)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(k)
	return hex.EncodeToString(sum[:8])
}

// SecretGeneration is the generation from which this member's keys derive
// from its current secret: 0 until SetKey was called (the configured
// Token).
func (m *Mesh) SecretGeneration() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sec.since
}

// SetKey makes secret the secret of generation gen and later, keeps the
// secret it replaces for the generations before (gen-1 stays in the
// window), and moves to generation gen as SetKeyGeneration does: without a
// restart. Setting the secret the member already holds only records gen.
func (m *Mesh) SetKey(gen uint64, secret []byte) error {
	if m.cfg.Key != nil {
		return ErrStaticKey
	}
	if len(secret) == 0 {
		return fmt.Errorf("%w: the gossip secret of generation %d is empty", ErrBadKey, gen)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sec := secrets{since: gen, cur: bytes.Clone(secret), prev: m.sec.of(gen - 1)}
	if gen == 0 {
		sec.prev = nil
	}
	if bytes.Equal(sec.prev, sec.cur) {
		sec.prev = nil
	}
	if !bytes.Equal(sec.cur, m.sec.cur) {
		m.log.Info("gossip secret replaced", "generation", gen)
	}
	return m.installLocked(gen, sec)
}

// HoldsPreviousSecret tells whether the member still holds the secret the
// last SetKey replaced (for generation-1, while others switch).
func (m *Mesh) HoldsPreviousSecret() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sec.prev != nil
}

// DropPreviousSecret forgets the secret the last SetKey replaced: the key
// it derived for generation-1 leaves the keyring, so that a holder of the
// old secret alone (a leaked token) can no longer send anything this
// member accepts. The follower calls it once the others had time to
// switch; it is a no-op when no previous secret is held.
func (m *Mesh) DropPreviousSecret() error {
	if m.cfg.Key != nil {
		return ErrStaticKey
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sec.prev == nil {
		return nil
	}
	sec := m.sec
	sec.prev = nil
	m.log.Info("previous gossip secret dropped", "generation", m.gen)
	return m.installLocked(m.gen, sec)
}
