package token

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

func TestGenerateParseRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		if !ValidID(tok.ID) || len(tok.Secret) != SecretLen {
			t.Fatalf("generated %q", tok.Reveal())
		}
		back, err := Parse(" " + tok.Reveal() + "\n")
		if err != nil || back != tok {
			t.Fatalf("parse %q: %v, %v", tok.Reveal(), back, err)
		}
		if seen[tok.Secret] {
			t.Fatalf("secret %d repeated", len(seen))
		}
		seen[tok.Secret] = true
	}
}

func TestParseErrorsNeverShowTheSecret(t *testing.T) {
	const secret = "s3cr3tpart0fthis"
	for _, in := range []string{
		"abcdef" + secret,        // no dot
		"abcdef." + secret + "x", // secret too long
		"abcdef." + strings.ToUpper(secret),
		"ab." + secret,     // id too short
		"ABCDEF." + secret, // id upper case
		secret,
		secret + "." + secret,
		"",
	} {
		_, err := Parse(in)
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("Parse(%q) = %v, want ErrMalformed", in, err)
		}
		if strings.Contains(strings.ToLower(err.Error()), secret) {
			t.Fatalf("Parse error shows the secret: %v", err)
		}
		if !strings.Contains(err.Error(), "redacted") {
			t.Fatalf("Parse error does not say the secret is redacted: %v", err)
		}
	}
	if _, err := Parse("abcdef.0123456789abcdeX"); err == nil || !strings.Contains(err.Error(), "token abcdef") {
		t.Fatalf("a bad secret's error should name the id: %v", err)
	}
}

func TestFormattingRedacts(t *testing.T) {
	tok := Token{ID: "abc123", Secret: "0123456789abcdef"}
	var b strings.Builder
	log := slog.New(slog.NewTextHandler(&b, nil))
	log.Info("x", "token", tok)
	for _, s := range []string{fmt.Sprint(tok), fmt.Sprintf("%v %+v %#v %s", tok, tok, tok, tok), b.String()} {
		if strings.Contains(s, tok.Secret) || !strings.Contains(s, "abc123") {
			t.Fatalf("formatted as %q", s)
		}
	}
	if tok.Reveal() != "abc123.0123456789abcdef" {
		t.Fatal(tok.Reveal())
	}
}

func TestCheck(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tok := func(mod func(*api.Token)) *api.Token {
		t := api.NewToken("abc123")
		t.Spec.Secret = "0123456789abcdef"
		t.Spec.Roles = []api.Role{api.RoleWorker}
		t.Spec.ExpiresAt = now.Add(time.Hour)
		if mod != nil {
			mod(t)
		}
		return t
	}
	worker := []api.Role{api.RoleWorker}
	for _, c := range []struct {
		name  string
		tok   *api.Token
		now   time.Time
		roles []api.Role
		want  error
	}{
		{"valid", tok(nil), now, worker, nil},
		{"no roles asked", tok(nil), now, nil, nil},
		{"unknown", nil, now, worker, ErrUnknown},
		{"expired at the instant", tok(nil), now.Add(time.Hour), worker, ErrExpired},
		{"expired later", tok(nil), now.Add(2 * time.Hour), worker, ErrExpired},
		{"never expires", tok(func(t *api.Token) { t.Spec.ExpiresAt = time.Time{} }), now.Add(1e6 * time.Hour), worker, nil},
		{"revoked", tok(func(t *api.Token) { t.Status.RevokedAt = now.Add(-time.Minute) }), now, worker, ErrRevoked},
		{"revoked and expired says revoked", tok(func(t *api.Token) { t.Status.RevokedAt = now }), now.Add(2 * time.Hour), worker, ErrRevoked},
		{"role not allowed", tok(nil), now, []api.Role{api.RoleControlPlane}, ErrRoleNotAllowed},
		{"one of two not allowed", tok(nil), now, []api.Role{api.RoleWorker, api.RoleControlPlane}, ErrRoleNotAllowed},
		{"both allowed", tok(func(t *api.Token) { t.Spec.Roles = []api.Role{api.RoleControlPlane, api.RoleWorker} }), now, []api.Role{api.RoleWorker, api.RoleControlPlane}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check(c.tok, c.now, c.roles)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("Check = %v, want %v", err, c.want)
			}
			if err != nil && strings.Contains(err.Error(), "0123456789abcdef") {
				t.Fatalf("error shows the secret: %v", err)
			}
		})
	}
}
