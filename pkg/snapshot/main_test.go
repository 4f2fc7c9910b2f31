package snapshot_test

import (
	"testing"

	"github.com/homystack/nico/pkg/etcdtest/leakcheck"
	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: the
// throwaway member of Verify and every client end with the call.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leakcheck.EtcdIgnores()...)
}
