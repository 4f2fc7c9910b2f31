package statuspage

import (
	"testing"

	"github.com/homystack/nico/pkg/etcdtest/leakcheck"
	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind (the
// hub, the server, event streams, the browser's connections).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leakcheck.EtcdIgnores()...)
}
