// Package secretbox seals the secrets nico keeps in the store (join
// tokens, kubeconfigs, SSH keys) with AES-256-GCM under the cluster's
// secrets key, <dataDir>/pki/secrets.key (docs/security.md).
//
// A sealed value is
//
//	version (1) | key id (1) | nonce (12) | ciphertext+tag
//
// and the name it is stored under (its store key) is the additional data,
// so a value moved to another key does not open. The key id is the first
// byte of SHA-256(key): a box holding several keys (rotation) picks the one
// a value was sealed with, and a value sealed under another key is told
// apart from a damaged one.
package secretbox

import (
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

// version is the layout of sealed values this package writes.
const version = 1

const headerSize = 2 // version, key id

// Sentinel errors.
var (
	// ErrOpen means a value did not open: damaged, or sealed under another
	// name (moved), or under another key with the same id.
	ErrOpen = errors.New("secretbox: cannot open")
	// ErrUnknownKey means the value was sealed under a key this box lacks.
	ErrUnknownKey = errors.New("secretbox: sealed under another key")
	// ErrKeyFile means the key file is unusable (size or permissions).
	ErrKeyFile = errors.New("secretbox: bad key file")
)

// Box seals with its first key and opens with any of its keys.
type Box struct {
	seal  byte
	aeads map[byte]cipher.AEAD
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
func KeyID(key []byte) byte {
	sum := sha256.Sum256(key)
	return sum[0]
}

// New returns a box that seals with keys[0] and opens with any of keys
// (older keys, during a rotation).
func New(keys ...[]byte) (*Box, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key", ErrKeyFile)
	}
	b := &Box{seal: KeyID(keys[0]), aeads: map[byte]cipher.AEAD{}}
	for i, k := range keys {
		if len(k) != KeySize {
			return nil, fmt.Errorf("%w: key %d is %d bytes, want %d", ErrKeyFile, i, len(k), KeySize)
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("secretbox: %w", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("secretbox: %w", err)
		}
		if _, dup := b.aeads[KeyID(k)]; !dup {
			b.aeads[KeyID(k)] = aead
		}
	}
	return b, nil
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
	aead := b.aeads[b.seal]
	out := make([]byte, headerSize+aead.NonceSize(), headerSize+aead.NonceSize()+len(plaintext)+aead.Overhead())
	out[0], out[1] = version, b.seal
	if _, err := rand.Read(out[headerSize:]); err != nil {
		return nil, fmt.Errorf("secretbox: nonce: %w", err)
	}
	return aead.Seal(out, out[headerSize:], plaintext, []byte(name)), nil
}

// Open decrypts a value read from name. Its errors say what is wrong
// without showing any of the value.
func (b *Box) Open(name string, sealed []byte) ([]byte, error) {
	if len(sealed) < headerSize {
		return nil, fmt.Errorf("%w: %s: %d bytes is too short to be sealed", ErrOpen, name, len(sealed))
	}
	if sealed[0] != version {
		return nil, fmt.Errorf("%w: %s: layout version %d, this build reads %d", ErrOpen, name, sealed[0], version)
	}
	aead, ok := b.aeads[sealed[1]]
	if !ok {
		return nil, fmt.Errorf("%w: %s was sealed under key id %02x; this secrets key has id %02x", ErrUnknownKey, name, sealed[1], b.seal)
	}
	rest := sealed[headerSize:]
	if len(rest) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("%w: %s: truncated", ErrOpen, name)
	}
	pt, err := aead.Open(nil, rest[:aead.NonceSize()], rest[aead.NonceSize():], []byte(name))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: damaged, or sealed for another key name", ErrOpen, name)
	}
	return pt, nil
}
