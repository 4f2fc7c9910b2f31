package store

// TokensDir holds the join tokens, sealed (package secrets).
const TokensDir = SecretsDir + "tokens/"

// TokenKey is where join token id is kept.
func TokenKey(id string) string { return TokensDir + id }
