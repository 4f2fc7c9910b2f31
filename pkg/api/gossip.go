package api

import "time"

// KindGossipKey is the kind of GossipKey.
const KindGossipKey = "GossipKey"

// GossipKey names the gossip key generation the mesh encrypts with (the
// keys themselves are derived from the cluster's gossip secret; see
// package gossip). nicoctl gossip rotate-key increments it; every member
// follows. rotate-key --new-secret also replaces the secret from the
// generation it moves to on (SecretGeneration), sealed to each node.
type GossipKey struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta    `json:"metadata"`
	Spec     GossipKeySpec `json:"spec"`
}

// GossipKeySpec is the wanted generation.
type GossipKeySpec struct {
	Generation uint64    `json:"generation"`
	RotatedBy  string    `json:"rotatedBy,omitempty"`
	RotatedAt  time.Time `json:"rotatedAt,omitzero"`
	// SecretGeneration is the generation from which on keys derive from
	// the secret of the last rotate-key --new-secret; 0: the cluster's
	// first secret (the bootstrap machine's token) was never replaced.
	SecretGeneration uint64 `json:"secretGeneration,omitempty"`
	// SecretCheck is a fingerprint of that secret (gossip.SecretCheck),
	// by which a member tells whether the secret it holds is the current
	// one. It reveals nothing of the secret.
	SecretCheck string `json:"secretCheck,omitempty"`
}

// NewGossipKey returns a GossipKey with its type filled in.
func NewGossipKey() *GossipKey {
	return &GossipKey{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindGossipKey}, Metadata: ObjectMeta{Name: "gossip"}}
}

// GetTypeMeta implements Object.
func (k *GossipKey) GetTypeMeta() *TypeMeta { return &k.TypeMeta }

// GetMetadata implements Object.
func (k *GossipKey) GetMetadata() *ObjectMeta { return &k.Metadata }

// KindGossipSecret is the kind of GossipSecret.
const KindGossipSecret = "GossipSecret"

// GossipSecret is the cluster's gossip secret of Spec.Generation sealed to
// one node's certificate key (package gossipkey), kept under that node's
// own secrets dir, which only that node and root can read.
type GossipSecret struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta       `json:"metadata"`
	Spec     GossipSecretSpec `json:"spec"`
}

// GossipSecretSpec is the sealed secret and the generation it is bound to.
type GossipSecretSpec struct {
	Generation uint64 `json:"generation"`
	// Sealed is gossipkey.Seal's output (base64 in JSON).
	Sealed []byte `json:"sealed"`
}

// NewGossipSecret returns node's GossipSecret with its type filled in.
func NewGossipSecret(node string) *GossipSecret {
	return &GossipSecret{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindGossipSecret}, Metadata: ObjectMeta{Name: node}}
}

// GetTypeMeta implements Object.
func (s *GossipSecret) GetTypeMeta() *TypeMeta { return &s.TypeMeta }

// GetMetadata implements Object.
func (s *GossipSecret) GetMetadata() *ObjectMeta { return &s.Metadata }
