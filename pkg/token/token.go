// Package token is nico's join token: its format `<id>.<secret>`, making
// and parsing one, and checking whether a stored token may be used.
//
// The id is public (it names the token in the store, in logs and in
// nicoctl output); the secret is never printed, logged or put in an error:
// String and LogValue redact it, and only Reveal gives the whole token.
package token

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// Lengths of the two halves, and the alphabet of both.
const (
	IDLen     = 6
	SecretLen = 16
	Alphabet  = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// ErrMalformed is returned by Parse for text that is not a token.
var ErrMalformed = errors.New("token: malformed")

// Token is a parsed join token.
type Token struct {
	ID     string
	Secret string
}

// Generate makes a new token from crypto/rand.
func Generate() (Token, error) {
	id, err := randomString(IDLen)
	if err != nil {
		return Token{}, err
	}
	secret, err := randomString(SecretLen)
	if err != nil {
		return Token{}, err
	}
	return Token{ID: id, Secret: secret}, nil
}

// randomString draws n characters of Alphabet uniformly (rejection
// sampling: 252 is the largest multiple of 36 below 256).
func randomString(n int) (string, error) {
	out := make([]byte, 0, n)
	buf := make([]byte, 2*n)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("token: random: %w", err)
		}
		for _, b := range buf {
			if b < 252 && len(out) < n {
				out = append(out, Alphabet[int(b)%len(Alphabet)])
			}
		}
	}
	return string(out), nil
}

// Parse reads `<id>.<secret>` (surrounding space is ignored). Its errors
// name the id when it is well formed and never contain the secret.
func Parse(s string) (Token, error) {
	s = strings.TrimSpace(s)
	id, secret, ok := strings.Cut(s, ".")
	if !ok {
		return Token{}, fmt.Errorf("%w: no \".\" between id and secret (%d characters, redacted); a token is <id>.<secret>, %d and %d characters of [a-z0-9]", ErrMalformed, len(s), IDLen, SecretLen)
	}
	if !valid(id, IDLen) {
		return Token{}, fmt.Errorf("%w: the id (%d characters before \".\", secret redacted) must be %d characters of [a-z0-9]", ErrMalformed, len(id), IDLen)
	}
	if !valid(secret, SecretLen) {
		name := "token " + id
		if secret != "" && strings.Contains(id, secret) {
			name = "token" // the bad secret is part of the id: show neither
		}
		return Token{}, fmt.Errorf("%w: %s: the secret (%d characters, redacted) must be %d characters of [a-z0-9]", ErrMalformed, name, len(secret), SecretLen)
	}
	return Token{ID: id, Secret: secret}, nil
}

// ValidID tells whether id has the form of a token id.
func ValidID(id string) bool { return valid(id, IDLen) }

func valid(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(Alphabet, rune(s[i])) {
			return false
		}
	}
	return true
}

// Reveal returns the whole token, secret included: for the one place that
// must show or write it (nicoctl token create, a token file).
func (t Token) Reveal() string { return t.ID + "." + t.Secret }

// String returns the token with its secret redacted, so that formatting a
// Token by mistake shows nothing secret.
func (t Token) String() string { return t.ID + ".<secret redacted>" }

// GoString is String, for %#v.
func (t Token) GoString() string { return t.String() }

// LogValue implements slog.LogValuer: only the id is logged.
func (t Token) LogValue() slog.Value { return slog.StringValue(t.String()) }
