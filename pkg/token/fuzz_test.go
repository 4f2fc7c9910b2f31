package token

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// FuzzParse feeds Parse what a person pastes or a file holds as a token.
// Text is either refused with ErrMalformed, by an error that never holds
// the text after the ".", or a token that reveals the text (trimmed),
// parses back to itself and formats with its secret redacted.
func FuzzParse(f *testing.F) {
	f.Add("abcdef.0123456789abcdef")
	f.Add("  abcdef.0123456789abcdef\n")
	f.Add("abcdef0123456789abcdef")
	f.Add("ABCDEF.0123456789abcdef")
	f.Add("abcdef.0123456789abcdeg.x")
	f.Add("abcdef.secret-with-dash!!")
	f.Add(".")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			// The error may name a well-formed id; nothing of it may be the secret.
			if id, secret, ok := strings.Cut(strings.TrimSpace(s), "."); ok && len(secret) >= 4 {
				msg := strings.ReplaceAll(err.Error(), id, "")
				if strings.Contains(msg, secret) && !strings.Contains(ErrMalformed.Error()+" the secret must be characters of [a-z0-9] redacted", secret) {
					t.Fatalf("error %q holds the secret %q", err, secret)
				}
			}
			return
		}
		if !ValidID(tok.ID) || len(tok.Secret) != SecretLen {
			t.Fatalf("parsed %q into id %q, secret of %d", s, tok.ID, len(tok.Secret))
		}
		if tok.Reveal() != strings.TrimSpace(s) {
			t.Fatalf("%q revealed as %q", s, tok.Reveal())
		}
		back, err := Parse(tok.Reveal())
		if err != nil || back != tok {
			t.Fatalf("round trip: %v %v", back, err)
		}
		for _, shown := range []string{tok.String(), fmt.Sprint(tok), fmt.Sprintf("%v %+v %#v %s", tok, tok, tok, tok)} {
			if strings.Contains(shown, tok.Secret) {
				t.Fatalf("formatting shows the secret: %s", shown)
			}
		}
	})
}
