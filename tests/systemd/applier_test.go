package systemd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/apply/applytest"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/homystack/nico/tests/systemd/harness"
)

// The applier test runs this test binary inside the guest, in
// nico-agent.service itself (the fixture's unit, sandboxing and all, with
// a drop-in that replaces the agent by it): with applierJobEnv set, it
// applies the job's generations with the real nixos applier and prints
// the outcomes as JSON.
const (
	applierJobEnv  = "NICO_APPLIER_TEST_JOB"
	applierExe     = "/usr/local/libexec/nico-applier-test"
	applierJobFile = "/etc/nico-applier-test/job.json"
	applierOut     = "/run/nico-applier-test.out"
	applierCmds    = "/run/nico-applier-test.cmds" // "<pid> <command>" per command the applier ran
	applierRelease = "/run/nico-test-release"      // the slow generation's activation waits for it
	applierState   = "/var/lib/nico-applier-test"  // the test flake's state dir
	applierRepo    = "/srv/fleet"
)

// applierDropIn makes nico-agent.service run the applier job once.
const applierDropIn = `# The applier test: the agent's unit runs the nixos applier once.
[Service]
Type=oneshot
ExecStart=
ExecStart=` + applierExe + `
Restart=no
RestartForceExitStatus=
WatchdogSec=0
TimeoutStartSec=60s
Environment=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
Environment=` + applierJobEnv + `=` + applierJobFile + `
StandardOutput=truncate:` + applierOut + `
`

// withoutCache removes what defect 9's fix gave the agent's unit.
const withoutCache = `[Service]
CacheDirectory=
UnsetEnvironment=XDG_CACHE_HOME
`

// applierJob is the generations the in-unit applier applies, in order.
type applierJob struct {
	Generations []apply.Generation
}

// applierOutcome is one generation's Apply.
type applierOutcome struct {
	Number int64
	Result apply.Result
	Err    string
	Is     string // the sentinel the error wraps
}

func init() {
	if job := os.Getenv(applierJobEnv); job != "" {
		os.Exit(runApplierJob(job))
	}
}

// runApplierJob is the in-unit applier: defaults of the agent's nixos
// applier (profile, /run/current-system) and its work dir in the state
// directory, the failed-units check against the guest's systemd, and a
// check of the test flake's health file.
func runApplierJob(file string) int {
	var job applierJob
	b, err := os.ReadFile(file)
	if err == nil {
		err = json.Unmarshal(b, &job)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "applier job:", err)
		return 1
	}
	// Offline and unsandboxed builds (applytest.NixEnv); the cache is the unit's.
	_ = os.Setenv("NIX_CONFIG", applytest.NixEnv("")["NIX_CONFIG"])
	gate := apply.Gate{Deadline: 3 * time.Second, Interval: 100 * time.Millisecond, Checks: []apply.Check{apply.CommandCheck{Runner: apply.ExecRunner{},
		Cmd: apply.Cmd{Name: "grep", Args: []string{"-qx", "ok", applierState + "/health"}}}}}
	cmds, err := os.OpenFile(applierCmds, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "applier job:", err)
		return 1
	}
	defer cmds.Close()
	n := apply.NewNixOS(apply.NixOSConfig{WorkDir: "/var/lib/nico/generations", Gate: gate, Runner: loggedRunner{cmds}})
	sentinels := map[string]error{"ErrInvalid": apply.ErrInvalid, "ErrFetch": apply.ErrFetch, "ErrBuild": apply.ErrBuild,
		"ErrActivate": apply.ErrActivate, "ErrHealth": apply.ErrHealth, "ErrRollback": apply.ErrRollback}
	enc := json.NewEncoder(os.Stdout)
	for _, g := range job.Generations {
		r, err := n.Apply(context.Background(), g)
		o := applierOutcome{Number: g.Number, Result: r}
		if err != nil {
			o.Err = err.Error()
			for name, s := range sentinels {
				if errors.Is(err, s) {
					o.Is = name
				}
			}
		}
		if err := enc.Encode(o); err != nil {
			return 1
		}
	}
	return 0
}

// loggedRunner is the ExecRunner, writing each command to a log first.
type loggedRunner struct{ log *os.File }

func (r loggedRunner) Run(ctx context.Context, c apply.Cmd) ([]byte, error) {
	fmt.Fprintf(r.log, "%d %s\n", os.Getpid(), c)
	return apply.ExecRunner{}.Run(ctx, c)
}

// TestNixOSApplierInAgentUnit runs the nixos applier, with real Nix and
// git, inside nico-agent.service as the module renders it (the fixture:
// User=root, ProtectHome=read-only, PrivateTmp=true, CacheDirectory=nico,
// XDG_CACHE_HOME=/var/cache/nico, ...) under the guest's real systemd, so
// that its activations run under the real systemd-run --wait.
//
// Defect 9: without CacheDirectory= and XDG_CACHE_HOME, nix build wants
// $HOME/.cache on the read-only /root and fails; with them, the test
// flake's good-1 builds, is set as the system profile and activated in
// the transient unit nico-activate-1; the same revision again switches
// nothing; broken's failing activation is rolled back in nico-rollback-3:
// the profile and /run/current-system point at good-1 again; a generation
// that leaves a failed unit fails the health gate (the failed-units check
// reads the guest's systemctl) and is rolled back too. An agent restarted
// (systemctl restart nico-agent) while an activation runs leaves it
// running in its own unit, and the new agent waits for it instead of
// starting a second one.
func TestNixOSApplierInAgentUnit(t *testing.T) {
	harness.Skip(t)
	applytest.RequireNix(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	unitFile, err := os.ReadFile(filepath.Join(fixturesDir(), "cp1/etc/systemd/system/nico-agent.service"))
	if err != nil {
		t.Fatalf("the agent's unit (make systemd-fixtures): %v", err)
	}
	for _, want := range []string{"ProtectHome=read-only", "User=root", "CacheDirectory=nico", `"XDG_CACHE_HOME=/var/cache/nico"`} {
		if !strings.Contains(string(unitFile), want) {
			t.Fatalf("the agent's unit has no %s", want)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	flake := applytest.NewFlake(t, filepath.Join(dir, "repo"),
		applytest.FlakeGeneration{Name: "good-1"},
		applytest.FlakeGeneration{Name: "broken", Fails: true},
		applytest.FlakeGeneration{Name: "leaves-a-failed-unit", FailUnit: "nico-test-app"},
		applytest.FlakeGeneration{Name: "slow", WaitFor: applierRelease})
	local := applytest.FlakeLocal{Host: "nixos1", State: applierState, CurrentSystem: "/run/current-system"}
	gen := func(n int64, name string) apply.Generation {
		return apply.Generation{Machine: "nixos1", Number: n, Spec: api.NixosConfigurationSpec{Generation: n,
			GitRepo: applierRepo, Revision: flake.Revs[name], AdditionalFiles: []api.AdditionalFile{local.File()}}}
	}
	job, err := json.Marshal(applierJob{Generations: []apply.Generation{gen(1, "good-1"), gen(2, "good-1"), gen(3, "broken"), gen(4, "leaves-a-failed-unit")}})
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "root") // a fresh /root: no cache from the host's Nix
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	h, err := harness.Boot(ctx, t, harness.Config{Name: "nixos1",
		Files: map[string]harness.File{
			"/etc/systemd/system/nico-agent.service":                        {Data: unitFile},
			"/etc/systemd/system/nico-agent.service.d/50-applier-test.conf": {Data: []byte(applierDropIn)},
			applierJobFile:          {Data: job},
			applierState + "/.keep": {},
		},
		Binds: []harness.Bind{{Src: exe, Dst: applierExe, RO: true}, {Src: flake.Repo, Dst: applierRepo, RO: true}, {Src: home, Dst: "/root"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("booted in %v", time.Since(start).Round(time.Millisecond))
	sh := func(t *testing.T, script string) string {
		t.Helper()
		out, err := h.Exec(ctx, "sh", "-c", script)
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	var outcomes func(t *testing.T, want int) []applierOutcome
	// run starts the unit (a oneshot: the start returns when the job is
	// done) and returns the outcomes.
	run := func(t *testing.T, want int) []applierOutcome {
		t.Helper()
		start := time.Now()
		if out, err := h.Exec(ctx, "systemctl", "start", "nico-agent.service"); err != nil {
			t.Fatalf("%v: %s\n%s", err, out, sh(t, "journalctl -o cat -n 40 -u nico-agent.service"))
		}
		t.Logf("nico-agent.service ran the job in %v", time.Since(start).Round(time.Millisecond))
		return outcomes(t, want)
	}
	outcomes = func(t *testing.T, want int) []applierOutcome {
		t.Helper()
		var outs []applierOutcome
		dec := json.NewDecoder(strings.NewReader(sh(t, "cat "+applierOut)))
		for dec.More() {
			var o applierOutcome
			if err := dec.Decode(&o); err != nil {
				t.Fatal(err)
			}
			outs = append(outs, o)
		}
		if len(outs) != want {
			t.Fatalf("outcomes %+v, want %d", outs, want)
		}
		return outs
	}

	t.Run("WithoutTheCacheDirectory", func(t *testing.T) {
		sh(t, "mkdir -p /run/systemd/system/nico-agent.service.d && printf '"+withoutCache+"' > /run/systemd/system/nico-agent.service.d/60-without-cache.conf && systemctl daemon-reload")
		defer sh(t, "rm /run/systemd/system/nico-agent.service.d/60-without-cache.conf && systemctl daemon-reload")
		o := run(t, 4)[0]
		t.Logf("generation 1: %s", o.Err)
		if o.Is != "ErrBuild" || !strings.Contains(o.Err, "/root/.cache") || !strings.Contains(o.Err, "Read-only file system") {
			t.Fatalf("generation 1 without a cache directory: %+v, want ErrBuild on the read-only /root/.cache", o)
		}
		if got := sh(t, "cat "+applierState+"/activations 2>/dev/null || true"); got != "" {
			t.Fatalf("activations: %s, want none", got)
		}
	})

	outs := run(t, 4)
	if o := outs[0]; o.Err != "" || o.Result.Skipped || !strings.HasSuffix(o.Result.Toplevel, "-nixos-system-nixos1-good-1") {
		t.Fatalf("good-1 in the agent's unit: %+v", o)
	}
	good := outs[0].Result.Toplevel
	if o := outs[1]; o.Err != "" || !o.Result.Skipped || o.Result.Toplevel != good {
		t.Fatalf("good-1 again: %+v, want skipped", o)
	}
	// The cause reaches the error: systemd-run's summary and the unit's journal.
	if o := outs[2]; o.Is != "ErrActivate" || !o.Result.RolledBack || o.Result.Toplevel != good || !strings.Contains(o.Err, "nico-activate-3") ||
		!strings.Contains(o.Err, "status=4") || !strings.Contains(o.Err, "activating broken failed") {
		t.Fatalf("broken: %+v, want ErrActivate from nico-activate-3 with its exit status 4 and its message, rolled back to %s", o, good)
	}
	t.Logf("broken: %s", outs[2].Err)
	// The failed-units check, against the guest's systemctl.
	if o := outs[3]; o.Is != "ErrHealth" || !o.Result.RolledBack || o.Result.Toplevel != good || !strings.Contains(o.Err, "failed: nico-test-app.service") {
		t.Fatalf("leaves-a-failed-unit: %+v, want ErrHealth naming nico-test-app.service, rolled back to %s", o, good)
	}
	t.Logf("leaves-a-failed-unit: %s", outs[3].Err)
	want := []string{"good-1", "switch", "broken", "switch", "good-1", "switch", "leaves-a-failed-unit", "switch", "good-1", "switch"}
	if got := strings.Fields(sh(t, "cat "+applierState+"/activations")); !slices.Equal(got, want) {
		t.Fatalf("activations %v, want %v (each failure followed by good-1's rollback)", got, want)
	}
	if got := sh(t, "readlink -f /nix/var/nix/profiles/system /run/current-system"); got != good+"\n"+good {
		t.Fatalf("profile and current system after the rollback: %s, want %s", got, good)
	}
	if got := sh(t, "ls /var/cache/nico/nix"); got == "" {
		t.Fatal("nothing in the unit's cache directory /var/cache/nico/nix")
	}
	// The activations ran in their transient units, under systemd-run --wait.
	// Their lines reach the journal through a stream: wait for them.
	for unit, want := range map[string]string{"nico-activate-3": "activating broken failed", "nico-rollback-3": "", "nico-activate-4": "", "nico-rollback-4": ""} {
		testwait.For(t, 10*time.Second, fmt.Sprintf("%q and its end in the journal of %s", want, unit), func() (bool, string) {
			out := sh(t, "journalctl -o cat -u "+unit+".service")
			return strings.Contains(out, want) && (strings.Contains(out, "Deactivated successfully") || strings.Contains(out, "Failed with result")), out
		})
	}

	t.Run("AgentRestartedMidActivation", func(t *testing.T) {
		// The agent restarts while slow's activation runs: the activation
		// goes on in its own unit, and the new agent waits for it rather
		// than start a second one.
		sh(t, "systemctl reset-failed nico-test-app.service")
		job, err := json.Marshal(applierJob{Generations: []apply.Generation{gen(5, "slow")}})
		if err != nil {
			t.Fatal(err)
		}
		write := h.Command(ctx, "sh", "-c", "cat > "+applierJobFile)
		write.Stdin = bytes.NewReader(job)
		if out, err := write.CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		sh(t, "systemctl start --no-block nico-agent.service")
		waitGuest(ctx, t, "nico-activate-5 runs", func() bool {
			return sh(t, "systemctl is-active nico-activate-5.service || true") == "activating" // a oneshot running
		})
		first := sh(t, "systemctl show -P MainPID nico-agent.service")
		sh(t, "systemctl restart --no-block nico-agent.service")
		var second string
		waitGuest(ctx, t, "the restarted agent waits for nico-activate-5", func() bool {
			for _, l := range strings.Split(sh(t, "cat "+applierCmds), "\n") {
				if pid, cmd, _ := strings.Cut(l, " "); pid != first && cmd == "systemctl is-active nico-activate-5" {
					second = pid
					return true
				}
			}
			return false
		})
		sh(t, "touch "+applierRelease)
		waitGuest(ctx, t, "the restarted agent's job ends", func() bool {
			return sh(t, "systemctl is-active nico-agent.service || true") == "inactive"
		})
		o := outcomes(t, 1)[0]
		if o.Err != "" || o.Result.RolledBack || !strings.HasSuffix(o.Result.Toplevel, "-nixos-system-nixos1-slow") {
			t.Fatalf("slow after the agent's restart: %+v", o)
		}
		if got := sh(t, "readlink -f /nix/var/nix/profiles/system /run/current-system"); got != o.Result.Toplevel+"\n"+o.Result.Toplevel {
			t.Fatalf("profile and current system: %s, want %s", got, o.Result.Toplevel)
		}
		acts := strings.Fields(sh(t, "cat "+applierState+"/activations"))
		if n := strings.Count(strings.Join(acts, " "), "slow switch"); n != 1 {
			t.Fatalf("slow was activated %d times, want once: %v\nagents %s then %s; commands:\n%s\njournal of nico-activate-5:\n%s", n, acts, first, second,
				sh(t, "cat "+applierCmds), sh(t, "journalctl -o short-monotonic -u nico-activate-5.service -u nico-agent.service | tail -40"))
		}
		if log := sh(t, "cat "+applierCmds); strings.Contains(log, second+" systemd-run --unit=nico-activate-5") {
			t.Fatalf("the restarted agent (pid %s) started a second activation:\n%s", second, log)
		}
	})
}

// waitGuest polls cond until it holds, failing t at ctx's end.
func waitGuest(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}
