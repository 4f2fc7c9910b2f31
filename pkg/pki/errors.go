package pki

import "errors"

// Sentinels, checked with errors.Is.
var (
	// ErrBadPEM: the input is not the PEM block expected (or does not parse).
	ErrBadPEM = errors.New("pki: bad PEM")
	// ErrKeyMismatch: a private key does not belong to the certificate.
	ErrKeyMismatch = errors.New("pki: key does not match certificate")
	// ErrBadRequest: a Request cannot be issued (no name, no usage, ...).
	ErrBadRequest = errors.New("pki: bad certificate request")
)
