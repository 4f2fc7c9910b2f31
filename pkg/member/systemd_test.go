package member_test

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/member/systemdtest"
)

// systemdFixture is a Systemd runtime over a fake systemd whose etcd.service
// runs a real embedded etcd member from the environment file.
type systemdFixture struct {
	rt      *member.Systemd
	units   *systemdtest.Units
	envFile string
}

// opts are the embedded etcd's, after the test timings.
func newSystemdFixture(t *testing.T, opts ...member.Option) systemdFixture {
	envFile := filepath.Join(t.TempDir(), "run", "etcd.env")
	units := systemdtest.NewUnits()
	opts = append([]member.Option{member.WithTimings(testTick, testElection)}, opts...)
	units.Add(member.DefaultUnit, systemdtest.NewEtcd(envFile, testLogger(t), opts...))
	rt, err := member.NewSystemd(member.SystemdConfig{Units: units, Journal: units, EnvironmentFile: envFile, TLSInEnvironment: true})
	if err != nil {
		t.Fatal(err)
	}
	return systemdFixture{rt: rt, units: units, envFile: envFile}
}

// TestSystemdContract runs the whole runtime contract, learner removal
// included, through the unit manager on real etcd members.
func TestSystemdContract(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts etcd members")
	}
	runtimeContract(t, plain(func() member.Runtime { return newSystemdFixture(t).rt }))
}

func TestSystemdWritesEnvironmentAndDrivesTheUnit(t *testing.T) {
	t.Parallel()
	ctx := caseContext(t)
	f := newSystemdFixture(t)
	stopAll(t, f.rt)
	cfg := newConfig(t, "env")
	cfg.InitialCluster = "env=" + cfg.PeerURL
	if err := f.rt.Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	env, err := member.ReadEnvironmentFile(f.envFile)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ETCD_NAME":                        "env",
		"ETCD_DATA_DIR":                    cfg.DataDir,
		"ETCD_INITIAL_CLUSTER":             cfg.InitialCluster,
		"ETCD_INITIAL_CLUSTER_STATE":       "new",
		"ETCD_INITIAL_CLUSTER_TOKEN":       cfg.ClusterToken,
		"ETCD_INITIAL_ADVERTISE_PEER_URLS": cfg.PeerURL,
		"ETCD_ADVERTISE_CLIENT_URLS":       cfg.ClientURL,
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if err := f.rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	// A unit that someone else started (the agent restarted, etcd kept
	// running) is restarted, so that it reads the new file.
	if err := f.units.StartUnit(ctx, member.DefaultUnit); err != nil {
		t.Fatal(err)
	}
	cfg.ClusterState = member.StateExisting
	if err := f.rt.Start(ctx, cfg); err != nil {
		t.Fatalf("Start over a running unit: %v", err)
	}
	env, _ = member.ReadEnvironmentFile(f.envFile)
	if env["ETCD_INITIAL_CLUSTER_STATE"] != "existing" {
		t.Fatalf("state in the file = %q, want existing", env["ETCD_INITIAL_CLUSTER_STATE"])
	}
	jobs := f.units.Jobs()
	want2 := []string{"start etcd.service", "stop etcd.service", "start etcd.service", "restart etcd.service"}
	if !slices.Equal(jobs, want2) {
		t.Fatalf("jobs = %q, want %q", jobs, want2)
	}
}

func TestSystemdExitThatIsNotARemoval(t *testing.T) {
	t.Parallel()
	ctx := caseContext(t)
	envFile := filepath.Join(t.TempDir(), "etcd.env")
	units := systemdtest.NewUnits()
	// The unit is a Sleeper that can be crashed; a real member started
	// beside it answers the readiness check on the client URL.
	srv := member.NewEmbedded(member.WithTimings(testTick, testElection))
	stopAll(t, srv)
	cfg := newConfig(t, "crash")
	if err := srv.Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	units.Add(member.DefaultUnit, systemdtest.NewSleeper())
	rt, err := member.NewSystemd(member.SystemdConfig{Units: units, Journal: units, EnvironmentFile: envFile, TLSInEnvironment: true})
	if err != nil {
		t.Fatal(err)
	}
	stopAll(t, rt)
	if err := rt.Start(ctx, cfg); err == nil || !strings.Contains(err.Error(), "cannot listen") {
		t.Fatalf("Start with the ports taken = %v, want a busy-port error", err)
	}
	// The ports are the running member's: start the unit first so that
	// the runtime does not check them, then take over.
	if err := units.StartUnit(ctx, member.DefaultUnit); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("segfault")
	if err := units.Crash(member.DefaultUnit, boom); err != nil {
		t.Fatal(err)
	}
	waitDone(ctx, t, rt)
	if err := rt.Err(); err == nil || errors.Is(err, member.ErrRemoved) || !strings.Contains(err.Error(), "failed") {
		t.Fatalf("Err after a crash = %v, want an exit naming the failed unit, not ErrRemoved", err)
	}
	// Stop after the exit keeps the reason.
	if err := rt.Stop(ctx); err != nil || rt.Err() == nil {
		t.Fatalf("Stop after exit = %v, Err %v", err, rt.Err())
	}
}

func TestSystemdStartJobFails(t *testing.T) {
	t.Parallel()
	ctx := caseContext(t)
	f := newSystemdFixture(t)
	stopAll(t, f.rt)
	f.units.FailJobs(func(verb, _ string) error {
		if verb == "start" {
			return member.ErrUnitJob
		}
		return nil
	})
	cfg := newConfig(t, "nojob")
	err := f.rt.Start(ctx, cfg)
	if !errors.Is(err, member.ErrUnitJob) {
		t.Fatalf("Start = %v, want ErrUnitJob", err)
	}
	assertStartFailedClean(t, f.rt, cfg)
}

func TestNewSystemdChecksItsConfig(t *testing.T) {
	t.Parallel()
	units := systemdtest.NewUnits()
	for _, c := range []member.SystemdConfig{
		{EnvironmentFile: "/run/nico/etcd.env"},
		{Units: units},
		{Units: units, EnvironmentFile: "etcd.env"},
	} {
		if _, err := member.NewSystemd(c); err == nil {
			t.Errorf("NewSystemd(%+v) succeeded", c)
		}
	}
}

func TestEnvironmentFileRefusesValuesSystemdWouldUnquote(t *testing.T) {
	t.Parallel()
	cfg := member.Config{Name: "a", ClusterToken: "two words"}
	if err := member.WriteEnvironmentFile(filepath.Join(t.TempDir(), "e"), cfg); err == nil {
		t.Fatal("a blank in a value was written")
	}
}
