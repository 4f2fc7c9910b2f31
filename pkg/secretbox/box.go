// Package secretbox seals the secrets nico keeps in the store (join
// tokens, kubeconfigs, SSH keys) with AES-256-GCM under the cluster's
// secrets key, <dataDir>/pki/secrets.key (docs/security.md).
//
// A sealed value is
//
//	version (1) = 2 | key id (8) | nonce (12) | ciphertext+tag
//
// and the name it is stored under (its store key) is the additional data,
// so a value moved to another key does not open. The key id is the first
// eight bytes of SHA-256(key): a box holding several keys (rotation) picks
// the one a value was sealed with, and a value sealed under another key is
// told apart from a damaged one. An id only selects candidates: Open tries
// every key of the box whose id matches, so two keys that share an id
// never hide each other's values.
//
// Values of layout version 1 (a one-byte key id, written before) still
// open; they are no longer written.
package secretbox

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
)

// KeySize is the size of a secrets key (AES-256).
const KeySize = 32

// version is the layout of sealed values this package writes; versionV1
// is the older layout it still opens.
const (
	version   = 2
	versionV1 = 1
)

// IDSize is the size of a key id in the current layout.
const IDSize = 8

// Sentinel errors.
var (
	// ErrOpen means a value did not open: damaged, or sealed under another
	// name (moved).
	ErrOpen = errors.New("secretbox: cannot open")
	// ErrUnknownKey means the value was sealed under a key this box lacks.
	ErrUnknownKey = errors.New("secretbox: sealed under another key")
	// ErrKeyFile means the key file is unusable (size or permissions).
	ErrKeyFile = errors.New("secretbox: bad key file")
)

// keyID is the id of a key; tests replace it to force collisions.
var keyID = func(key []byte) [IDSize]byte {
	sum := sha256.Sum256(key)
	return [IDSize]byte(sum[:IDSize])
}

type boxKey struct {
	id   [IDSize]byte
	aead cipher.AEAD
}

// Box seals with its first key and opens with any of its keys.
type Box struct {
	keys []boxKey // keys[0] seals
}

// NewKey returns a fresh random secrets key.
func NewKey() ([]byte, error) {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("secretbox: new key: %w", err)
	}
	return k, nil
}

// KeyID is the id a key's values carry.
func KeyID(key []byte) [IDSize]byte { return keyID(key) }

// New returns a box that seals with keys[0] and opens with any of keys
// (older keys, during a rotation). A key given twice is kept once.
func New(keys ...[]byte) (*Box, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key", ErrKeyFile)
	}
	b := &Box{}
	for i, k := range keys {
		if len(k) != KeySize {
			return nil, fmt.Errorf("%w: key %d is %d bytes, want %d", ErrKeyFile, i, len(k), KeySize)
		}
		if slicesContainsKey(keys[:i], k) {
			continue
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("secretbox: %w", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("secretbox: %w", err)
		}
		b.keys = append(b.keys, boxKey{id: keyID(k), aead: aead})
	}
	return b, nil
}

func slicesContainsKey(keys [][]byte, k []byte) bool {
	for _, o := range keys {
		if bytes.Equal(o, k) {
			return true
		}
	}
	return false
}

// Load reads the key file at path (pki.Dir.SecretsKey()): exactly KeySize
// bytes, readable by its owner only. A key file anyone else may read is
// refused: the key opens every secret in the store.
func Load(path string) (*Box, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("secretbox: secrets key: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o: the secrets key must be readable by its owner only (chmod 600 %s)", ErrKeyFile, path, perm, path)
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secretbox: secrets key: %w", err)
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("%w: %s holds %d bytes, want %d random bytes", ErrKeyFile, path, len(key), KeySize)
	}
	return New(key)
}

// Seal encrypts plaintext to be stored under name.
func (b *Box) Seal(name string, plaintext []byte) ([]byte, error) {
	k := b.keys[0]
	header := 1 + IDSize
	out := make([]byte, header+k.aead.NonceSize(), header+k.aead.NonceSize()+len(plaintext)+k.aead.Overhead())
	out[0] = version
	copy(out[1:], k.id[:])
	if _, err := rand.Read(out[header:]); err != nil {
		return nil, fmt.Errorf("secretbox: nonce: %w", err)
	}
	return k.aead.Seal(out, out[header:], plaintext, []byte(name)), nil
}

// Open decrypts a value read from name. Its errors say what is wrong
// without showing any of the value.
func (b *Box) Open(name string, sealed []byte) ([]byte, error) {
	if len(sealed) < 1 {
		return nil, fmt.Errorf("%w: %s: empty, not a sealed value", ErrOpen, name)
	}
	var idLen int
	switch sealed[0] {
	case version:
		idLen = IDSize
	case versionV1:
		idLen = 1
	default:
		return nil, fmt.Errorf("%w: %s: layout version %d, this build reads %d and %d", ErrOpen, name, sealed[0], versionV1, version)
	}
	if len(sealed) < 1+idLen {
		return nil, fmt.Errorf("%w: %s: %d bytes is too short to be sealed", ErrOpen, name, len(sealed))
	}
	id, rest := sealed[1:1+idLen], sealed[1+idLen:]
	candidates := 0
	for _, k := range b.keys {
		if !bytes.Equal(k.id[:idLen], id) {
			continue
		}
		candidates++
		if len(rest) < k.aead.NonceSize()+k.aead.Overhead() {
			return nil, fmt.Errorf("%w: %s: truncated", ErrOpen, name)
		}
		if pt, err := k.aead.Open(nil, rest[:k.aead.NonceSize()], rest[k.aead.NonceSize():], []byte(name)); err == nil {
			return pt, nil
		}
	}
	if candidates == 0 {
		return nil, fmt.Errorf("%w: %s was sealed under key id %x; this secrets key has id %x", ErrUnknownKey, name, id, b.keys[0].id[:idLen])
	}
	return nil, fmt.Errorf("%w: %s: damaged, or sealed for another key name", ErrOpen, name)
}
