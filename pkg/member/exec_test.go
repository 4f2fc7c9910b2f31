package member_test

import (
	"testing"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
)

func TestExecContract(t *testing.T) {
	for _, bin := range etcdtest.Binaries(t) {
		t.Run("etcd-"+bin.Version, func(t *testing.T) {
			runtimeContract(t, func() member.Runtime {
				return member.NewExec(bin.Path, member.WithTimings(testTick, testElection))
			})
		})
	}
}
