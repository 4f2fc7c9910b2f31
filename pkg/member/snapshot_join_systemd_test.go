package member_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/member"
)

// TestSnapshottedLearnerOnSystemd runs testSnapshottedJoins with each
// learner started by the Systemd runtime over the real systemd's D-Bus API:
// a Type=notify unit named in NICO_SYSTEMD_ETCD_UNIT runs the etcd binary
// with the environment file NICO_SYSTEMD_ETCD_ENV names; the first member
// is embedded. tests/systemd's TestSnapshottedLearnerUnderSystemd runs it
// inside a guest whose PID 1 is systemd; elsewhere it skips.
func TestSnapshottedLearnerOnSystemd(t *testing.T) {
	t.Parallel()
	unit, envFile := os.Getenv("NICO_SYSTEMD_ETCD_UNIT"), os.Getenv("NICO_SYSTEMD_ETCD_ENV")
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		t.Skip("systemd is not PID 1 here (no /run/systemd/system)")
	}
	if unit == "" || envFile == "" {
		t.Skip("set NICO_SYSTEMD_ETCD_UNIT and NICO_SYSTEMD_ETCD_ENV to an etcd unit that reads that environment file")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	units, err := member.DialSystemd(ctx, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer units.Close()
	learner := func() member.Runtime {
		rt, err := member.NewSystemd(member.SystemdConfig{Units: units, Unit: unit, EnvironmentFile: envFile, TLSInEnvironment: true, PollInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	leader := func() member.Runtime { return member.NewEmbedded(member.WithTimings(testTick, testElection)) }
	// One slow learner is let through: about one join in a hundred here
	// publishes nothing for etcd's request timeout (its own /members never
	// lists it published, so it is no lost publish and nothing restarts
	// it); without the restart about half are slow.
	testSnapshottedJoins(t, leader, learner, snapshotServeBound, 1)
}
