// Package storecontract is the contract of nico's store edge: the cases
// that package store's behaviour over etcd must pass, run alike against a
// real etcd (package store's tests, through pkg/etcdtest) and against the
// in-memory one (package memetcd's tests). A case that passes on one and
// fails on the other is a difference of the fake to fix, or a promise of
// etcd's nico must stop relying on.
package storecontract
