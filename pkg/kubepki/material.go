package kubepki

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"

	"github.com/homystack/nico/pkg/pki"
	"golang.org/x/crypto/ssh"
)

// newCA makes a CA and returns its certificate and key (PKCS#8) PEM.
func newCA(commonName string, now time.Time) (certPEM, keyPEM []byte, err error) {
	ca, err := pki.NewCA(commonName, pki.DefaultCAValidity, now)
	if err != nil {
		return nil, nil, fmt.Errorf("kubepki: %w", err)
	}
	keyPEM, err = marshalKey(ca.Key)
	if err != nil {
		return nil, nil, err
	}
	return ca.CertPEM, keyPEM, nil
}

// newKeyPair makes an ECDSA P-256 key pair: the public key (PKIX PEM, what
// --service-account-key-file reads) and the private key (PKCS#8 PEM, what
// --service-account-signing-key-file reads).
func newKeyPair() (pubPEM, keyPEM []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("kubepki: key: %w", err)
	}
	der, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("kubepki: public key: %w", err)
	}
	keyPEM, err = marshalKey(k)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), keyPEM, nil
}

func marshalKey(k any) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("kubepki: marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// tokenAlphabet is kubeadm's bootstrap-token alphabet, so the token is
// also a valid kubeadm token ([a-z0-9]{6}.[a-z0-9]{16}) and k3s takes it.
const tokenAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// NewToken returns a random join token of kubeadm's shape from
// crypto/rand: 22 characters of 36, about 113 bits.
func NewToken() (string, error) {
	b := make([]byte, 0, 23)
	n := big.NewInt(int64(len(tokenAlphabet)))
	for i := range 22 {
		if i == 6 {
			b = append(b, '.')
		}
		r, err := rand.Int(rand.Reader, n)
		if err != nil {
			return "", fmt.Errorf("kubepki: token: %w", err)
		}
		b = append(b, tokenAlphabet[r.Int64()])
	}
	return string(b), nil
}

// NewSSHKey returns a new ed25519 key pair: the private key in OpenSSH's
// format and the public key as an authorized_keys line, both commented.
func NewSSHKey(comment string) (privPEM, authorized []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("kubepki: ssh key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, nil, fmt.Errorf("kubepki: ssh key: %w", err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, nil, fmt.Errorf("kubepki: ssh key: %w", err)
	}
	line := ssh.MarshalAuthorizedKey(sp) // ends in a newline
	line = append(line[:len(line)-1], []byte(" "+comment+"\n")...)
	return pem.EncodeToMemory(block), line, nil
}
