// Package snapshot takes, checks, stores, prunes and verifies etcd
// snapshots.
//
// A snapshot is what etcd's Maintenance.Snapshot streams from one member:
// its bolt database followed by the sha256 of that database (32 bytes, so
// that a whole snapshot's size is 32 more than a multiple of 512). Check
// reads a file the way `etcdutl snapshot status` does (the sha256, then
// the database's revision, live keys, size and etcd's crc32 hash); Take
// streams one from a member into a local file and checks it; a Store keeps
// snapshots, each with its Meta beside it (name.db and name.json), off the
// node they were taken on: a directory (a mounted share) or an
// S3-compatible bucket; Prune applies a Retention; Verify restores one into
// a throwaway member and counts what it serves.
//
//	member --Take--> local file --Check--> Meta --Store.Put--> name.db + name.json
//	                                                 |
//	           Verify <--Store.Get-- List/Prune -----+
package snapshot
