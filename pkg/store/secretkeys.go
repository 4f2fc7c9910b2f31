package store

// TokensDir holds the join tokens, sealed (package secrets).
const TokensDir = SecretsDir + "tokens/"

// TokenKey is where join token id is kept.
func TokenKey(id string) string { return TokensDir + id }

// NodeSecretsDir holds node name's own secrets (readable by that node and
// root only, package rbac).
func NodeSecretsDir(name string) string { return SecretsDir + "nodes/" + name + "/" }

// NodeGossipSecretKey holds the gossip secret sealed to node name
// (api.GossipSecret).
func NodeGossipSecretKey(name string) string { return NodeSecretsDir(name) + "gossip-secret" }

// NamedSecretsDir holds the named secrets (api.Secret, sealed), which only
// root identities read.
const NamedSecretsDir = SecretsDir + "named/"

// NamedSecretKey is where named secret name is kept.
func NamedSecretKey(name string) string { return NamedSecretsDir + name }

// NodeNamedSecretsKey holds the named-secret values node name may read,
// sealed to its certificate key (api.NodeSecrets).
func NodeNamedSecretsKey(name string) string { return NodeSecretsDir(name) + "named-secrets" }
