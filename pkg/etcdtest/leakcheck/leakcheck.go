// Package leakcheck holds what the goroutine-leak checks (goleak) of
// packages that run embedded etcd members ignore.
package leakcheck

import "go.uber.org/goleak"

// EtcdIgnores are the goroutines a goroutine-leak check (goleak) should
// not count in a package whose tests run embedded etcd members: gRPC's
// resolver serializer, which outlives a closed client by a moment, and the
// HTTP connections between members that etcd leaves open for a moment
// after a member stops or restarts in-process.
func EtcdIgnores() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
	}
}

// WhileServing are the options of a goroutine-leak check taken while the
// test's embedded members still run, to find what a client left behind:
// EtcdIgnores, and the members' gRPC handlers, which finish a call its
// client has already given up on (a Status the client's deadline cut
// short) in their own time.
func WhileServing() []goleak.Option {
	return append(EtcdIgnores(),
		goleak.IgnoreAnyFunction("google.golang.org/grpc.(*Server).handleStream"))
}
