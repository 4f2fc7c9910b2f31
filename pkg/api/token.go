package api

import (
	"slices"
	"time"
)

// KindToken is the kind of Token.
const KindToken = "Token"

// Token is a join token as the cluster keeps it (docs/security.md): the
// name is the token's public id, Spec.Secret its secret half. Tokens are
// stored sealed under secrets/tokens/<id> (package secrets), never in clear.
type Token struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta  `json:"metadata"`
	Spec     TokenSpec   `json:"spec"`
	Status   TokenStatus `json:"status"`
}

// TokenSpec is what the token allows, and until when.
type TokenSpec struct {
	// Secret is the secret half of <id>.<secret>. It never leaves the
	// store but sealed, and is shown only with --show-secrets.
	Secret string `json:"secret"`
	// Roles are the roles a machine joining with the token may take.
	Roles []Role `json:"roles"`
	// ExpiresAt is when the token stops working (CreatedAt + TTL); zero:
	// never (the bootstrap token).
	ExpiresAt   time.Time `json:"expiresAt,omitzero"`
	Description string    `json:"description,omitempty"`
}

// TokenStatus is what happened to the token.
type TokenStatus struct {
	// RevokedAt is when nicoctl token revoke stopped the token; zero: not
	// revoked.
	RevokedAt time.Time `json:"revokedAt,omitzero"`
	// Uses counts the joins the token allowed.
	Uses       int       `json:"uses"`
	LastUsedAt time.Time `json:"lastUsedAt,omitzero"`
	LastUsedBy string    `json:"lastUsedBy,omitempty"`
}

// NewToken returns a Token with id and its type filled in.
func NewToken(id string) *Token {
	return &Token{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindToken}, Metadata: ObjectMeta{Name: id}}
}

// Allows tells whether the token lets a machine take role r.
func (t *Token) Allows(r Role) bool { return slices.Contains(t.Spec.Roles, r) }

// Revoked tells whether the token was revoked.
func (t *Token) Revoked() bool { return !t.Status.RevokedAt.IsZero() }

// Expired tells whether the token has expired at now.
func (t *Token) Expired(now time.Time) bool {
	return !t.Spec.ExpiresAt.IsZero() && !now.Before(t.Spec.ExpiresAt)
}

// GetTypeMeta implements Object.
func (t *Token) GetTypeMeta() *TypeMeta { return &t.TypeMeta }

// GetMetadata implements Object.
func (t *Token) GetMetadata() *ObjectMeta { return &t.Metadata }
