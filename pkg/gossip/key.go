package gossip

import (
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
)

// KeySize is the size of derived gossip keys (AES-256).
const KeySize = 32

// ErrBadKey is returned for a key of a size AES does not take, or an empty token.
var ErrBadKey = errors.New("gossip: bad key")

// DeriveKey derives the gossip key of generation gen from the cluster token
// with HKDF-SHA256 (see the package doc).
func DeriveKey(token []byte, gen uint64) ([]byte, error) {
	if len(token) == 0 {
		return nil, fmt.Errorf("%w: the cluster token is empty", ErrBadKey)
	}
	k, err := hkdf.Key(sha256.New, token, []byte("nico gossip v1"), "key generation "+strconv.FormatUint(gen, 10), KeySize)
	if err != nil {
		return nil, fmt.Errorf("%w: deriving generation %d: %v", ErrBadKey, gen, err)
	}
	return k, nil
}

// CheckKey accepts keys of 16, 24 or 32 bytes (AES-128, -192, -256).
func CheckKey(k []byte) error {
	switch len(k) {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("%w: %d bytes; accepted: 16, 24 or 32 bytes (AES-128, AES-192, AES-256)", ErrBadKey, len(k))
}

// window is the key generations a member holding generation gen keeps:
// gen-1 (when gen > 0), gen and gen+1, the primary first.
func window(gen uint64) []uint64 {
	out := []uint64{gen, gen + 1}
	if gen > 0 {
		out = append(out, gen-1)
	}
	return out
}
