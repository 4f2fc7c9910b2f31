package gossipkey

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func p256(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	node, other := p256(t), p256(t)
	secret := bytes.Repeat([]byte{0x5a}, SecretSize)
	sealed, err := Seal(&node.PublicKey, "a", 7, secret)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, secret) {
		t.Fatal("the sealed value holds the secret in clear")
	}
	got, err := Open(node, "a", 7, sealed)
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("open: %v", err)
	}
	again, _ := Seal(&node.PublicKey, "a", 7, secret)
	if bytes.Equal(again, sealed) {
		t.Fatal("two seals of one secret are equal: the ephemeral key or nonce is not fresh")
	}

	refused := func(what string, priv *ecdsa.PrivateKey, name string, gen uint64, b []byte) {
		t.Helper()
		pt, err := Open(priv, name, gen, b)
		if !errors.Is(err, ErrOpen) || pt != nil {
			t.Fatalf("%s: opened (%v), want ErrOpen", what, err)
		}
		if strings.Contains(err.Error(), string(secret)) {
			t.Fatalf("%s: the error shows the secret", what)
		}
	}
	refused("another node's key", other, "a", 7, sealed)
	refused("bound to another node", node, "b", 7, sealed)
	refused("bound to another generation", node, "a", 8, sealed)
	refused("truncated", node, "a", 7, sealed[:40])
	refused("empty", node, "a", 7, nil)
	for i := range sealed {
		b := bytes.Clone(sealed)
		b[i] ^= 0x01
		refused(fmt.Sprintf("byte %d flipped", i), node, "a", 7, b)
	}

	if _, err := Seal(nil, "a", 1, secret); !errors.Is(err, ErrSealKey) {
		t.Fatalf("seal to no key: %v", err)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if _, err := Seal(&p384.PublicKey, "a", 1, secret); !errors.Is(err, ErrSealKey) {
		t.Fatalf("seal to a P-384 key: %v", err)
	}
	if _, err := Open(p384, "a", 7, sealed); !errors.Is(err, ErrSealKey) {
		t.Fatalf("open with a P-384 key: %v", err)
	}
}
