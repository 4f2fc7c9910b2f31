// Package linearkv is the client workload the fault and real-systemd
// tiers run against etcd while they break or restart it (tests/faults,
// tests/systemd; test packages cannot import each other): clients reading
// and writing a few registers, every write recording its value under an
// ack key in the same transaction, and the check of their history:
// linearizable (porcupine, Model), no acknowledged write lost, and the
// longest time a client went without a success.
//
//	h, wait := linearkv.Run(ctx, newClient, 3, seed)
//	...                          // the faults, the restarts
//	cancel(); v := linearkv.Check(t, cli, wait(), "history.html")
package linearkv
