package member_test

import (
	"testing"

	"github.com/homystack/nico/pkg/member"
)

func TestEmbeddedContract(t *testing.T) {
	t.Parallel()
	runtimeContract(t, plain(func() member.Runtime {
		return member.NewEmbedded(member.WithTimings(testTick, testElection))
	}))
}
