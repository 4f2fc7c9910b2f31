package pki

import (
	"bytes"
	"crypto/x509"
	"fmt"
)

// A trust bundle is a ca.crt holding more than one CA certificate: during a
// CA rotation (docs/security.md) every machine trusts the old CA and the
// new one until every leaf is re-issued.

// AppendCA returns the bundle with the certificates of caPEM added, each
// unless already present, in order. An empty bundle is allowed.
func AppendCA(bundlePEM, caPEM []byte) ([]byte, error) {
	var have []*x509.Certificate
	if len(bytes.TrimSpace(bundlePEM)) > 0 {
		certs, err := ParseCerts(bundlePEM)
		if err != nil {
			return nil, fmt.Errorf("pki: bundle: %w", err)
		}
		have = certs
	}
	add, err := ParseCerts(caPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: CA to add: %w", err)
	}
	out := encodeAll(have)
	for _, c := range add {
		if !contains(have, c) {
			if !c.IsCA {
				return nil, fmt.Errorf("%w: %q is not a CA certificate", ErrBadRequest, c.Subject.CommonName)
			}
			have = append(have, c)
			out = append(out, encodeCert(c.Raw)...)
		}
	}
	return out, nil
}

// RemoveCA returns the bundle without the certificates of caPEM. Removing
// the last certificate is refused: a machine must trust some CA.
func RemoveCA(bundlePEM, caPEM []byte) ([]byte, error) {
	have, err := ParseCerts(bundlePEM)
	if err != nil {
		return nil, fmt.Errorf("pki: bundle: %w", err)
	}
	drop, err := ParseCerts(caPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: CA to remove: %w", err)
	}
	var keep []*x509.Certificate
	for _, c := range have {
		if !contains(drop, c) {
			keep = append(keep, c)
		}
	}
	if len(keep) == 0 {
		return nil, fmt.Errorf("%w: removing every CA from the bundle", ErrBadRequest)
	}
	return encodeAll(keep), nil
}

func contains(certs []*x509.Certificate, c *x509.Certificate) bool {
	for _, h := range certs {
		if h.Equal(c) {
			return true
		}
	}
	return false
}

func encodeAll(certs []*x509.Certificate) []byte {
	var out []byte
	for _, c := range certs {
		out = append(out, encodeCert(c.Raw)...)
	}
	return out
}
