package coordinator

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: every
// candidate, term and controller ends with its context. Ignored: gRPC's
// resolver serializer, which outlives a closed client by a moment, and the
// HTTP connections between embedded etcd members that a member restarted
// in-process leaves open (TestTermSurvivesAClosedWatch); the coordinator
// itself serves and dials no HTTP.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
	)
}
