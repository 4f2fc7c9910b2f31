package coordinator

import (
	"testing"

	"github.com/homystack/nico/pkg/etcdtest/leakcheck"
	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: every
// candidate, term and controller ends with its context. Ignored: what
// embedded etcd members leave for a moment (leakcheck.EtcdIgnores;
// TestTermSurvivesAClosedWatch restarts one in-process); the coordinator
// itself serves and dials no HTTP.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leakcheck.EtcdIgnores()...)
}
