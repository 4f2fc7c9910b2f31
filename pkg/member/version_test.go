package member_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/member/systemdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestExecUseVersionRunsTheOtherBinary: an Exec member given both etcd
// binaries restarts on its data dir under the other one, and the member
// reports the version it was told to run; a version it has no binary for
// is refused and changes nothing.
func TestExecUseVersionRunsTheOtherBinary(t *testing.T) {
	t.Parallel()
	bins := etcdtest.Binaries(t)
	if len(bins) < 2 {
		t.Skip("needs two etcd binaries of different minors")
	}
	ctx := caseContext(t)
	paths := make([]string, len(bins))
	for i, b := range bins {
		paths[i] = b.Path
	}
	byVersion, err := member.BinariesByVersion(ctx, paths)
	if err != nil {
		t.Fatal(err)
	}
	from, to := bins[0], bins[len(bins)-1]
	rt := member.NewExec(from.Path, member.WithTimings(testTick, testElection), member.WithBinaries(byVersion), member.WithBinaryVersion(from.Version))
	stopAll(t, rt)
	cfg := newConfig(t, "ver")
	if err := rt.Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	cli := etcdtest.NewClient(t, cfg.ClientURL)
	if got := serverVersion(ctx, t, cli, cfg.ClientURL); got != from.Version {
		t.Fatalf("first start runs %s, want %s", got, from.Version)
	}
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := rt.UseVersion("3.99.0"); !errors.Is(err, member.ErrVersionUnavailable) {
		t.Fatalf("UseVersion(3.99.0) = %v, want ErrVersionUnavailable", err)
	}
	if rt.Version() != from.Version {
		t.Fatalf("Version after a refused UseVersion = %q, want %q", rt.Version(), from.Version)
	}
	if err := rt.UseVersion(to.Version); err != nil {
		t.Fatal(err)
	}
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if got := serverVersion(ctx, t, cli, cfg.ClientURL); got != to.Version {
		t.Fatalf("after UseVersion(%s) the member runs %s", to.Version, got)
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the data written under %s is not there under %s: %v %v", from.Version, to.Version, resp, err)
	}
}

// TestEmbeddedRefusesAnotherVersion: the embedded runtime runs only the
// etcd compiled in, and says so.
func TestEmbeddedRefusesAnotherVersion(t *testing.T) {
	t.Parallel()
	rt := member.NewEmbedded()
	if rt.Version() != member.EmbeddedVersion {
		t.Fatalf("Version = %q, want %q", rt.Version(), member.EmbeddedVersion)
	}
	if err := rt.UseVersion(member.EmbeddedVersion); err != nil {
		t.Fatalf("UseVersion(compiled) = %v", err)
	}
	if err := rt.UseVersion("3.6.16"); !errors.Is(err, member.ErrVersionUnavailable) {
		t.Fatalf("UseVersion(3.6.16) = %v, want ErrVersionUnavailable", err)
	}
}

func serverVersion(ctx context.Context, t *testing.T, cli *clientv3.Client, url string) string {
	t.Helper()
	st, err := cli.Status(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	return st.Version
}

// TestSystemdUseVersionFollowsTheSystemsEtcd: the systemd runtime accepts
// the version its unit's binary (as the switched system names it) reports,
// and refuses another, naming the package to roll.
func TestSystemdUseVersionFollowsTheSystemsEtcd(t *testing.T) {
	t.Parallel()
	bin := etcdtest.Binaries(t)[0]
	units := systemdtest.NewUnits()
	rt, err := member.NewSystemd(member.SystemdConfig{Units: units, Journal: units, EnvironmentFile: t.TempDir() + "/etcd.env", Binary: bin.Path})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.UseVersion(bin.Version); err != nil {
		t.Fatalf("UseVersion(%s), the binary's own version: %v", bin.Version, err)
	}
	err = rt.UseVersion("3.4.45")
	if !errors.Is(err, member.ErrVersionUnavailable) || !strings.Contains(err.Error(), "services.etcd.package") {
		t.Fatalf("UseVersion(3.4.45) = %v, want ErrVersionUnavailable naming services.etcd.package", err)
	}
}
