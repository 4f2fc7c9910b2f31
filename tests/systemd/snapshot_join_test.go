package systemd

import (
	"context"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/tests/systemd/harness"
)

// snapshotEtcdUnit is etcd's unit as nixpkgs writes it, in what matters
// here: Type=notify (its start job completes at READY=1, once etcd serves),
// settings from the environment file the Systemd runtime writes, and no
// Restart=. It listens where the file advertises, which the test picks.
const snapshotEtcdUnit = `[Unit]
Description=nico: etcd for pkg/member's snapshotted-join test

[Service]
Type=notify
EnvironmentFile=-/run/nico-snapshot/etcd.env
ExecStart=/usr/local/libexec/etcd --listen-peer-urls=${ETCD_INITIAL_ADVERTISE_PEER_URLS} --listen-client-urls=${ETCD_ADVERTISE_CLIENT_URLS}
Restart=no
TimeoutStartSec=30s
`

// TestSnapshottedLearnerUnderSystemd runs pkg/member's
// TestSnapshottedLearnerOnSystemd inside a guest: ten learners join one
// after the other a cluster whose raft log is compacted, each started by
// the Systemd runtime through the guest's systemd as a Type=notify unit
// running the etcd binary, and all but at most one serve within 3 s of
// their start (about one join in a hundred publishes nothing for etcd's
// request timeout, which is not the loss the runtime restarts). About half
// lose their first publish to the snapshot; without the runtime's restart
// they serve only after etcd's request timeout (7 s).
func TestSnapshottedLearnerUnderSystemd(t *testing.T) {
	harness.Skip(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bins := etcdtest.Binaries(t)
	runMemberTest(ctx, t, harness.Config{
		Name:  "snapjoin",
		Files: map[string]harness.File{"/etc/systemd/system/nico-snapshot-etcd.service": {Data: []byte(snapshotEtcdUnit)}},
		Binds: []harness.Bind{{Src: bins[len(bins)-1].Path, Dst: "/usr/local/libexec/etcd", RO: true}},
	}, "TestSnapshottedLearnerOnSystemd",
		"NICO_SYSTEMD_ETCD_UNIT=nico-snapshot-etcd.service", "NICO_SYSTEMD_ETCD_ENV=/run/nico-snapshot/etcd.env")
}
