package member

import (
	"testing"

	"github.com/homystack/nico/pkg/etcdtest/leakcheck"
	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind.
// Ignored: what embedded etcd members leave for a moment after they stop
// (leakcheck.EtcdIgnores); the runtimes here serve and dial no HTTP of
// their own.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leakcheck.EtcdIgnores()...)
}
