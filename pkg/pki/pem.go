package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
)

// PEM block types this package reads and writes.
const (
	pemCertificate = "CERTIFICATE"
	pemCSR         = "CERTIFICATE REQUEST"
	pemPrivateKey  = "PRIVATE KEY"    // PKCS#8, what this package writes
	pemECKey       = "EC PRIVATE KEY" // SEC 1, accepted on read
)

// ParseCerts returns every certificate in a PEM bundle, in order.
func ParseCerts(certPEM []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := certPEM
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != pemCertificate {
			return nil, fmt.Errorf("%w: block %q, want %q", ErrBadPEM, block.Type, pemCertificate)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: certificate: %w", ErrBadPEM, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%w: no %q block", ErrBadPEM, pemCertificate)
	}
	return certs, nil
}

// ParseCert returns the first certificate of a PEM bundle (a leaf file's).
func ParseCert(certPEM []byte) (*x509.Certificate, error) {
	certs, err := ParseCerts(certPEM)
	if err != nil {
		return nil, err
	}
	return certs[0], nil
}

// ParseKey parses a PKCS#8 or SEC 1 EC private key from PEM. The error never
// contains the key's bytes.
func ParseKey(keyPEM []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, fmt.Errorf("%w: no private key block", ErrBadPEM)
	}
	switch block.Type {
	case pemPrivateKey:
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: PKCS#8 key does not parse", ErrBadPEM)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("%w: key type %T cannot sign", ErrBadPEM, k)
		}
		return s, nil
	case pemECKey:
		k, err := x509.ParseECPrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: EC key does not parse", ErrBadPEM)
		}
		return k, nil
	default:
		return nil, fmt.Errorf("%w: block %q, want %q", ErrBadPEM, block.Type, pemPrivateKey)
	}
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der})
}

func encodeKey(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("pki: marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der}), nil
}

// keyMatches reports whether signer's public key is the certificate's.
func keyMatches(cert *x509.Certificate, signer crypto.Signer) bool {
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	return ok && pub.Equal(cert.PublicKey)
}

func pemDecode(data []byte) (*pem.Block, []byte) { return pem.Decode(data) }

func pemEncode(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
