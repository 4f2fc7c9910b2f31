package api

import "time"

// EtcdCompactionStatus is the last compaction of nico's etcd, as the
// coordinator leader's compaction controller recorded it: history before
// Revision is gone, what is newer is kept. The space it frees is reclaimed
// on disk by the defragmentation that follows (spec.policy.defrag*).
type EtcdCompactionStatus struct {
	// Revision is the revision compacted to.
	Revision int64 `json:"revision,omitempty"`
	// CompactedAt is when, on the leader's clock.
	CompactedAt time.Time `json:"compactedAt,omitzero"`
	// RetainedSince is when the leader saw Revision as the store's: the
	// history kept reaches back at least to then.
	RetainedSince time.Time `json:"retainedSince,omitzero"`
}
