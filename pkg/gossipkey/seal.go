package gossipkey

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
)

// A gossip secret sealed to one node is
//
//	version (1) | ephemeral P-256 public key (65, uncompressed) | nonce (12) | ciphertext+tag
//
// The AES-256-GCM key is HKDF-SHA256 of the ECDH of the ephemeral key and
// the node certificate's key (salt: both public keys); the node's name and
// the secret's generation are the additional data, so a value copied to
// another node or generation does not open.
const (
	sealVersion = 1
	sealInfo    = "nico gossip secret v1"
	p256PubSize = 65
)

// Sentinel errors of sealing.
var (
	// ErrSealKey means the public or private key is not an ECDSA P-256 key.
	ErrSealKey = errors.New("gossipkey: the node key is not ECDSA P-256")
	// ErrOpen means a sealed secret did not open: another node's key,
	// damaged, or bound to another node or generation.
	ErrOpen = errors.New("gossipkey: sealed gossip secret does not open")
)

func sealAAD(node string, gen uint64) []byte {
	return []byte(sealInfo + "\x00node=" + node + "\x00generation=" + strconv.FormatUint(gen, 10))
}

func sealAEAD(shared, ephPub, recipPub []byte) (cipher.AEAD, error) {
	salt := append(append([]byte{}, ephPub...), recipPub...)
	k, err := hkdf.Key(sha256.New, shared, salt, sealInfo, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Seal encrypts secret, the gossip secret of generation gen, so that only
// the holder of the private key of pub (node's certificate key) opens it.
func Seal(pub *ecdsa.PublicKey, node string, gen uint64, secret []byte) ([]byte, error) {
	if pub == nil {
		return nil, fmt.Errorf("%w: node %s: no public key", ErrSealKey, node)
	}
	recip, err := pub.ECDH()
	if err != nil || recip.Curve() != ecdh.P256() {
		return nil, fmt.Errorf("%w: node %s", ErrSealKey, node)
	}
	eph, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("gossipkey: ephemeral key: %w", err)
	}
	shared, err := eph.ECDH(recip)
	if err != nil {
		return nil, fmt.Errorf("gossipkey: key agreement with node %s: %w", node, err)
	}
	ephPub := eph.PublicKey().Bytes()
	aead, err := sealAEAD(shared, ephPub, recip.Bytes())
	if err != nil {
		return nil, fmt.Errorf("gossipkey: %w", err)
	}
	out := make([]byte, 0, 1+len(ephPub)+aead.NonceSize()+len(secret)+aead.Overhead())
	out = append(append(out, sealVersion), ephPub...)
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("gossipkey: nonce: %w", err)
	}
	out = append(out, nonce...)
	return aead.Seal(out, nonce, secret, sealAAD(node, gen)), nil
}

// Open decrypts a secret sealed to node for generation gen with the
// node's private key. Its errors show none of the value.
func Open(priv *ecdsa.PrivateKey, node string, gen uint64, sealed []byte) ([]byte, error) {
	if priv == nil {
		return nil, fmt.Errorf("%w: node %s: no private key", ErrSealKey, node)
	}
	own, err := priv.ECDH()
	if err != nil || own.Curve() != ecdh.P256() {
		return nil, fmt.Errorf("%w: node %s", ErrSealKey, node)
	}
	if len(sealed) < 1+p256PubSize+12+16 {
		return nil, fmt.Errorf("%w: node %s, generation %d: %d bytes is too short", ErrOpen, node, gen, len(sealed))
	}
	if sealed[0] != sealVersion {
		return nil, fmt.Errorf("%w: node %s, generation %d: layout version %d, this build reads %d", ErrOpen, node, gen, sealed[0], sealVersion)
	}
	ephPub := sealed[1 : 1+p256PubSize]
	eph, err := ecdh.P256().NewPublicKey(ephPub)
	if err != nil {
		return nil, fmt.Errorf("%w: node %s, generation %d: bad ephemeral key", ErrOpen, node, gen)
	}
	shared, err := own.ECDH(eph)
	if err != nil {
		return nil, fmt.Errorf("%w: node %s, generation %d: key agreement failed", ErrOpen, node, gen)
	}
	aead, err := sealAEAD(shared, ephPub, own.PublicKey().Bytes())
	if err != nil {
		return nil, fmt.Errorf("gossipkey: %w", err)
	}
	rest := sealed[1+p256PubSize:]
	secret, err := aead.Open(nil, rest[:aead.NonceSize()], rest[aead.NonceSize():], sealAAD(node, gen))
	if err != nil {
		return nil, fmt.Errorf("%w: node %s, generation %d: sealed to another key, damaged, or bound to another node or generation", ErrOpen, node, gen)
	}
	return secret, nil
}
