package api

import "time"

// KindGossipKey is the kind of GossipKey.
const KindGossipKey = "GossipKey"

// GossipKey names the gossip key generation the mesh encrypts with (the
// keys themselves are derived from the cluster token; see package gossip).
// nicoctl gossip rotate-key increments it; every member follows.
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
}

// NewGossipKey returns a GossipKey with its type filled in.
func NewGossipKey() *GossipKey {
	return &GossipKey{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindGossipKey}, Metadata: ObjectMeta{Name: "gossip"}}
}

// GetTypeMeta implements Object.
func (k *GossipKey) GetTypeMeta() *TypeMeta { return &k.TypeMeta }

// GetMetadata implements Object.
func (k *GossipKey) GetMetadata() *ObjectMeta { return &k.Metadata }
