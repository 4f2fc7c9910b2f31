package switchcheck

import (
	"testing"

	"github.com/homystack/nico/pkg/etcdtest/leakcheck"
	"go.uber.org/goleak"
)

// TestMain fails the package when a check leaves a goroutine behind (its
// watch ends with it).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leakcheck.EtcdIgnores()...)
}
