package store

// LivenessKey holds the leader's api.Liveness of every node.
const LivenessKey = "liveness"

// GossipKeyKey holds the api.GossipKey: the mesh's key generation.
const GossipKeyKey = "gossip-key"
