package joinendpoint

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the package's tests leave no goroutine behind: the
// endpoint, its controllers, its token pruning and its etcd clients all
// end with Run.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gRPC's resolver serializer outlives a closed client by a moment.
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
	)
}
