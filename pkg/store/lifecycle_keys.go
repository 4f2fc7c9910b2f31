package store

// Bookkeeping of the join endpoints and the token registry (docs/security.md).
const (
	// JoinNoncesDir holds the nonce of every accepted join request, each
	// on a lease of the replay window, so that a request replayed to
	// another join endpoint is refused too.
	JoinNoncesDir = "join-nonces/"
	// TokenTombstonesDir holds the id of every pruned token, so that a
	// pruned id is never registered again (a revoked bootstrap token must
	// not come back when the bootstrap machine restarts).
	TokenTombstonesDir = "token-tombstones/"
)

// JoinNonceKey is where a join request's nonce digest (hex) is recorded.
func JoinNonceKey(digest string) string { return JoinNoncesDir + digest }

// TokenTombstoneKey records that token id was pruned.
func TokenTombstoneKey(id string) string { return TokenTombstonesDir + id }
