package apply_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	. "github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/apply/applytest"
)

// hostRunner runs the applier's commands on this machine, which is not
// NixOS and whose systemd (if any) is not the test's: systemd-run --wait
// runs its command directly, its exit status standing for the unit's;
// systemctl reports no unit running and none failed, journalctl has no
// entries (the command's own error holds its stderr). git, nix, nix-env
// and readlink run for real. tests/systemd runs the same applier under a
// real systemd.
type hostRunner struct {
	env   []string // added to every command's (applytest.NixEnv)
	mu    sync.Mutex
	units []string
}

func (r *hostRunner) Run(ctx context.Context, c Cmd) ([]byte, error) {
	c.Env = append(append([]string(nil), r.env...), c.Env...)
	switch c.Name {
	case "systemd-run":
		i := slices.IndexFunc(c.Args, func(a string) bool { return !strings.HasPrefix(a, "--") })
		if i < 0 || !slices.Contains(c.Args[:i], "--wait") {
			return nil, fmt.Errorf("hostRunner: want systemd-run --wait with a command: %s", c)
		}
		for _, a := range c.Args[:i] {
			if u, ok := strings.CutPrefix(a, "--unit="); ok {
				r.mu.Lock()
				r.units = append(r.units, u)
				r.mu.Unlock()
			}
		}
		return ExecRunner{}.Run(ctx, Cmd{Name: c.Args[i], Args: c.Args[i+1:], Env: c.Env})
	case "journalctl":
		return nil, nil
	case "systemctl":
		if len(c.Args) > 0 && c.Args[0] == "is-active" {
			return []byte("inactive\n"), errors.New("systemctl is-active: exit status 3")
		}
		return nil, nil // list-units --state=failed: none
	}
	return ExecRunner{}.Run(ctx, c)
}

func (r *hostRunner) Units() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.units...)
}

// realNix is one machine under test for the real-Nix tests.
type realNix struct {
	n                          *NixOS
	runner                     *hostRunner
	flake                      *applytest.Flake
	local                      applytest.FlakeLocal
	work, profile, booted, dir string
}

func newRealNix(t *testing.T, gens ...applytest.FlakeGeneration) *realNix {
	t.Helper()
	applytest.RequireNix(t)
	dir := t.TempDir()
	var env []string
	for k, v := range applytest.NixEnv(filepath.Join(dir, "cache")) {
		env = append(env, k+"="+v)
	}
	m := &realNix{runner: &hostRunner{env: env}, dir: dir, work: filepath.Join(dir, "work"),
		profile: filepath.Join(dir, "profiles", "system"), booted: filepath.Join(dir, "booted-system")}
	m.local = applytest.FlakeLocal{Host: "m1", State: filepath.Join(dir, "state"), CurrentSystem: filepath.Join(dir, "current-system")}
	for _, d := range []string{m.local.State, filepath.Dir(m.profile)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { removeAutoRoots(t, dir) })
	m.flake = applytest.NewFlake(t, filepath.Join(dir, "repo"), gens...)
	gate := Gate{Deadline: 2 * time.Second, Interval: 50 * time.Millisecond, Checks: []Check{CommandCheck{Runner: ExecRunner{},
		Cmd: Cmd{Name: "grep", Args: []string{"-qx", "ok", filepath.Join(m.local.State, "health")}}}}}
	m.n = NewNixOS(NixOSConfig{WorkDir: m.work, Profile: m.profile, CurrentSystem: m.local.CurrentSystem, BootedSystem: m.booted,
		Gate: gate, Runner: m.runner})
	return m
}

func (m *realNix) gen(t *testing.T, number int64, name string) Generation {
	t.Helper()
	rev, ok := m.flake.Revs[name]
	if !ok {
		t.Fatalf("no generation %q in the test flake", name)
	}
	return Generation{Machine: "m1", Number: number, Spec: api.NixosConfigurationSpec{
		Generation: number, GitRepo: m.flake.Repo, Revision: rev, AdditionalFiles: []api.AdditionalFile{m.local.File()}}}
}

// removeAutoRoots removes the garbage collector roots nix-env registered
// for the test's profile links below dir (the collector would drop them
// once dangling, but a test machine may never collect).
func removeAutoRoots(t *testing.T, dir string) {
	const auto = "/nix/var/nix/gcroots/auto"
	ents, _ := os.ReadDir(auto)
	for _, e := range ents {
		p := filepath.Join(auto, e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir+"/") {
			if err := os.Remove(p); err != nil {
				t.Logf("garbage collector root %s: %v", p, err)
			}
		}
	}
}

// realNixSubject is the contract's machine with real Nix: the test flake
// has a commit for each revision the contract names.
func realNixSubject(t *testing.T) subject {
	m := newRealNix(t,
		applytest.FlakeGeneration{Name: "good-1"},
		applytest.FlakeGeneration{Name: "good-2"},
		applytest.FlakeGeneration{Name: "good-3"},
		applytest.FlakeGeneration{Name: "unhealthy", Health: "unhealthy"},
		applytest.FlakeGeneration{Name: "broken", Fails: true})
	return subject{applier: m.n,
		running: func() string {
			top, err := filepath.EvalSymlinks(m.local.CurrentSystem)
			if err != nil {
				return "initial"
			}
			_, name, _ := strings.Cut(filepath.Base(top), "-nixos-system-m1-")
			return name
		},
		spec: func(rev string) api.NixosConfigurationSpec { return m.gen(t, 0, rev).Spec },
	}
}

// activations is state/activations: "<generation> <op>" per run of a
// switch-to-configuration.
func (m *realNix) activations() []string {
	b, _ := os.ReadFile(filepath.Join(m.local.State, "activations"))
	return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(b)), " ", ":"))
}

func resolve(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return r
}

func (m *realNix) profileLinks() int {
	links, _ := filepath.Glob(m.profile + "-*-link")
	return len(links)
}

// TestNixOSRealNix drives the nixos applier through real git and real Nix
// (Debian's nix-bin, no daemon, offline): the test flake's toplevels are
// fetched at a revision that is not the repository's HEAD, built with the
// additional file local.nix, set as a real profile's generations and
// activated; a second apply of the same revision switches nothing; a
// generation whose activation fails and one that fails the health gate
// are rolled back: the profile and the current system point back at the
// previous generation and its switch-to-configuration ran again.
func TestNixOSRealNix(t *testing.T) {
	t.Parallel()
	m := newRealNix(t,
		applytest.FlakeGeneration{Name: "good-1"},
		applytest.FlakeGeneration{Name: "broken", Fails: true},
		applytest.FlakeGeneration{Name: "unhealthy", Health: "unhealthy"},
		applytest.FlakeGeneration{Name: "good-2", Kernel: "k2"})
	ctx := t.Context()

	start := time.Now()
	r1, err := m.n.Apply(ctx, m.gen(t, 1, "good-1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("good-1: fetched, built, switched and gated in %v", time.Since(start).Round(time.Millisecond))
	if r1.Skipped || r1.RolledBack || r1.RebootNeeded || !strings.HasPrefix(r1.Toplevel, "/nix/store/") || !strings.HasSuffix(r1.Toplevel, "-nixos-system-m1-good-1") {
		t.Fatalf("good-1: %+v", r1)
	}
	if _, err := os.Stat(r1.Toplevel + "/bin/switch-to-configuration"); err != nil {
		t.Fatalf("the built toplevel: %v", err)
	}
	t.Run("FetchedAtTheRevision", func(t *testing.T) {
		out, err := exec.Command("git", "-C", filepath.Join(m.work, "gen-1"), "rev-parse", "HEAD").Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != m.flake.Revs["good-1"] {
			t.Fatalf("checkout of generation 1 at %q (%v), want %s (HEAD of the repository is good-2's %s)", got, err, m.flake.Revs["good-1"], m.flake.Revs["good-2"])
		}
		if b, err := os.ReadFile(filepath.Join(m.work, "gen-1", "local.nix")); err != nil || string(b) != m.local.File().Inline {
			t.Fatalf("additional file local.nix: %q %v", b, err)
		}
	})
	if got := m.activations(); !slices.Equal(got, []string{"good-1:switch"}) {
		t.Fatalf("activations %v, want good-1's switch", got)
	}
	if got := resolve(t, m.profile); got != r1.Toplevel || m.profileLinks() != 1 {
		t.Fatalf("profile -> %s (%d generations), want %s", got, m.profileLinks(), r1.Toplevel)
	}
	if cur, err := m.n.Current(ctx); err != nil || cur != r1.Toplevel {
		t.Fatalf("current %q %v, want %s", cur, err, r1.Toplevel)
	}
	// The machine boots good-1.
	if err := os.Symlink(r1.Toplevel, m.booted); err != nil {
		t.Fatal(err)
	}

	r2, err := m.n.Apply(ctx, m.gen(t, 2, "good-1"))
	if err != nil || !r2.Skipped || r2.Toplevel != r1.Toplevel {
		t.Fatalf("the same revision again: %+v %v, want skipped", r2, err)
	}
	if got := m.activations(); len(got) != 1 || m.profileLinks() != 1 {
		t.Fatalf("the skipped generation switched: activations %v, %d profile generations", got, m.profileLinks())
	}

	checkRolledBack := func(t *testing.T, name string, r Result, err error, is error, cause string, want []string) {
		t.Helper()
		if !errors.Is(err, is) || !strings.Contains(err.Error(), cause) || !r.RolledBack || r.Toplevel != r1.Toplevel {
			t.Fatalf("%s: %+v %v, want %v with %q, rolled back to good-1", name, r, err, is, cause)
		}
		if got := m.activations(); !slices.Equal(got, want) {
			t.Fatalf("activations %v, want %v", got, want)
		}
		if got := resolve(t, m.profile); got != r1.Toplevel {
			t.Fatalf("profile -> %s after the rollback, want good-1's %s", got, r1.Toplevel)
		}
		if got := resolve(t, m.local.CurrentSystem); got != r1.Toplevel {
			t.Fatalf("current system -> %s after the rollback, want good-1's %s", got, r1.Toplevel)
		}
	}
	r3, err := m.n.Apply(ctx, m.gen(t, 3, "broken"))
	checkRolledBack(t, "broken", r3, err, ErrActivate, "activating broken failed", []string{"good-1:switch", "broken:switch", "good-1:switch"})
	// good-1, broken, good-1 again.
	if n := m.profileLinks(); n != 3 {
		t.Fatalf("%d profile generations after the rollback, want 3", n)
	}
	if got := m.runner.Units(); !slices.Equal(got, []string{"nico-activate-1", "nico-activate-3", "nico-rollback-3"}) {
		t.Fatalf("transient units %v", got)
	}

	r4, err := m.n.Apply(ctx, m.gen(t, 4, "unhealthy"))
	checkRolledBack(t, "unhealthy", r4, err, ErrHealth, "grep -qx ok", []string{"good-1:switch", "broken:switch", "good-1:switch", "unhealthy:switch", "good-1:switch"})

	r5, err := m.n.Apply(ctx, m.gen(t, 5, "good-2"))
	if err != nil || r5.RolledBack || !strings.HasSuffix(r5.Toplevel, "-nixos-system-m1-good-2") || !r5.RebootNeeded {
		t.Fatalf("good-2 (a new kernel): %+v %v, want applied and a reboot needed", r5, err)
	}
	if got := resolve(t, m.profile); got != r5.Toplevel {
		t.Fatalf("profile -> %s, want %s", got, r5.Toplevel)
	}
}

// TestNixOSRealNixBadInput: a revision the repository lacks and an
// attribute the flake lacks fail with real git's and real Nix's words,
// and nothing is switched.
func TestNixOSRealNixBadInput(t *testing.T) {
	t.Parallel()
	m := newRealNix(t, applytest.FlakeGeneration{Name: "good-1"})
	ctx := t.Context()
	g := m.gen(t, 1, "good-1")
	g.Spec.Revision = strings.Repeat("0", 40)
	_, err := m.n.Apply(ctx, g)
	t.Logf("missing revision: %v", err)
	if !errors.Is(err, ErrFetch) || !strings.Contains(err.Error(), "00000000") {
		t.Fatalf("missing revision: %v, want %v", err, ErrFetch)
	}
	g = m.gen(t, 2, "good-1")
	g.Spec.Flake = "#nope"
	_, err = m.n.Apply(ctx, g)
	t.Logf("unknown attribute: %v", err)
	if !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown attribute: %v, want %v", err, ErrBuild)
	}
	g = m.gen(t, 3, "good-1")
	g.Spec.AdditionalFiles = nil
	_, err = m.n.Apply(ctx, g)
	t.Logf("without the additional file: %v", err)
	if !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), "local.nix") {
		t.Fatalf("without the additional file: %v, want %v naming local.nix", err, ErrBuild)
	}
	if got := m.activations(); len(got) > 0 || m.profileLinks() > 0 {
		t.Fatalf("switched: %v, %d profile generations", got, m.profileLinks())
	}
}
