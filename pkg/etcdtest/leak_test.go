package etcdtest

import (
	"testing"

	"github.com/homystack/nico/pkg/etcdtest/leakcheck"
	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind; the
// members' HTTP connections that etcd closes a moment after a member
// stops are not counted (leakcheck.EtcdIgnores), as in every package that
// runs embedded members.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leakcheck.EtcdIgnores()...)
}
