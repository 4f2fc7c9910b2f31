package token

import (
	"errors"
	"fmt"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// Reasons a token is refused. The join endpoint sends them to the joining
// machine, which tells its user.
var (
	ErrUnknown        = errors.New("token: unknown token")
	ErrExpired        = errors.New("token: expired")
	ErrRevoked        = errors.New("token: revoked")
	ErrRoleNotAllowed = errors.New("token: role not allowed")
)

// Check tells whether stored token tok (nil: none with that id) lets a
// machine take roles at now. It is pure; the error names the token's id,
// never its secret.
//
//	nil ─▶ ErrUnknown
//	revoked ─▶ ErrRevoked          (before expiry: revocation is the news)
//	now ≥ expiresAt ─▶ ErrExpired
//	a role outside spec.roles ─▶ ErrRoleNotAllowed
func Check(tok *api.Token, now time.Time, roles []api.Role) error {
	if tok == nil {
		return ErrUnknown
	}
	id := tok.Metadata.Name
	if tok.Revoked() {
		return fmt.Errorf("%w: token %s was revoked at %s", ErrRevoked, id, tok.Status.RevokedAt.UTC().Format(time.RFC3339))
	}
	if tok.Expired(now) {
		return fmt.Errorf("%w: token %s expired at %s", ErrExpired, id, tok.Spec.ExpiresAt.UTC().Format(time.RFC3339))
	}
	for _, r := range roles {
		if !tok.Allows(r) {
			return fmt.Errorf("%w: token %s allows roles %v, not %q", ErrRoleNotAllowed, id, tok.Spec.Roles, r)
		}
	}
	return nil
}
