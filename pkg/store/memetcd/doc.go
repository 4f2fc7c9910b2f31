// Package memetcd is an etcd that lives in memory, for tests of the code
// above package store: one Etcd serves the KV, Watch and Lease APIs of
// every *clientv3.Client it hands out (Client), with etcd's revisions,
// transactions, watches from a revision, compaction and leases whose
// expiry follows an injected clock, so a test advances the clock instead
// of waiting. Sessions and elections of client/v3/concurrency run over it.
//
// Faults wraps a client's KV, Watcher and Lease to fail chosen operations
// (by kind, by key prefix, the next N or after N) with a chosen error, to
// show that a caller returns or retries a store error rather than losing
// it.
//
// What it does not do: the Cluster and Maintenance APIs (a client's are
// nil), nested transactions' duplicate-key checks, request size limits,
// authentication. package storecontract holds the cases it shares with a
// real etcd; they are what "behaves like etcd" means here.
package memetcd
