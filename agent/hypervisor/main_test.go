package hypervisor

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the package's tests leave no goroutine behind: the
// controller, its runtime and its watches all end with Run.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gRPC's resolver serializer outlives a closed client by a moment.
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
	)
}
