package applytest

import (
	"embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
)

// flakeFS is the test flake for real Nix (testdata/flake/flake.nix).
//
//go:embed testdata/flake/flake.nix
var flakeFS embed.FS

// FlakeGeneration is what one commit of the test flake's repository
// builds: the toplevel's name, whether its activation succeeds, what it
// leaves in the state's health file, and which kernel it links.
type FlakeGeneration struct {
	Name string
	// Fails makes switch-to-configuration switch the current-system link
	// and then exit 4.
	Fails bool
	// Health is written to <state>/health by a successful activation
	// ("ok" when empty).
	Health string
	// Kernel names the kernel link (k1 when empty).
	Kernel string
	// FailUnit, when set, is a transient unit a successful activation
	// leaves failed (systemd-run /bin/false): a real systemd only.
	FailUnit string
	// WaitFor, when set, makes the activation wait until this file exists
	// before it switches.
	WaitFor string
}

func (g FlakeGeneration) nix() string {
	act, health, kernel := "succeeds", g.Health, g.Kernel
	if g.Fails {
		act = "fails"
	}
	if health == "" {
		health = "ok"
	}
	if kernel == "" {
		kernel = "k1"
	}
	return fmt.Sprintf("{ name = %q; activation = %q; health = %q; kernel = %q; failUnit = %q; waitFor = %q; }\n", g.Name, act, health, kernel, g.FailUnit, g.WaitFor)
}

// Flake is a local git repository of the test flake with one commit per
// generation, in the order given; its last commit is HEAD.
type Flake struct {
	// Repo is the repository's directory, usable as a gitRepo.
	Repo string
	// Revs maps each generation's name to its full commit id.
	Revs map[string]string
}

// NewFlake makes the repository in dir (which must not exist or be empty).
func NewFlake(t testing.TB, dir string, gens ...FlakeGeneration) *Flake {
	t.Helper()
	b, err := flakeFS.ReadFile("testdata/flake/flake.nix")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=nico test", "GIT_AUTHOR_EMAIL=test@nico.invalid",
			"GIT_COMMITTER_NAME=nico test", "GIT_COMMITTER_EMAIL=test@nico.invalid", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "flake.nix"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	f := &Flake{Repo: dir, Revs: map[string]string{}}
	for _, g := range gens {
		if err := os.WriteFile(filepath.Join(dir, "generation.nix"), []byte(g.nix()), 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", "flake.nix", "generation.nix")
		git("commit", "-q", "-m", "generation "+g.Name)
		f.Revs[g.Name] = git("rev-parse", "HEAD")
	}
	return f
}

// FlakeLocal is the test flake's local.nix: the machine under test.
type FlakeLocal struct {
	Host string // the nixosConfigurations attribute
	// State is a directory the activations log to and write health into.
	State string
	// CurrentSystem is the link switch-to-configuration points at the
	// toplevel (the applier's NixOSConfig.CurrentSystem).
	CurrentSystem string
}

// File is local.nix as an additional file of a generation's spec.
func (l FlakeLocal) File() api.AdditionalFile {
	return api.AdditionalFile{Path: "local.nix", Inline: fmt.Sprintf("{ system = %q; host = %q; state = %q; currentSystem = %q; }\n",
		NixSystem(), l.Host, l.State, l.CurrentSystem)}
}

// NixSystem is Nix's name of this machine's platform (builtins.currentSystem,
// which a flake's pure evaluation cannot read).
func NixSystem() string {
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64", "386": "i686", "riscv64": "riscv64"}[runtime.GOARCH]
	if arch == "" {
		arch = runtime.GOARCH
	}
	return arch + "-" + runtime.GOOS
}

// NixEnv is the environment the real-Nix tests build with: no substituter
// (offline; the lookups of cache.nixos.org cost seconds), no build sandbox
// (the builder uses the host's /bin), and the evaluation cache in cacheDir.
func NixEnv(cacheDir string) map[string]string {
	return map[string]string{
		"NIX_CONFIG":     "substituters =\nsandbox = false\n",
		"XDG_CACHE_HOME": cacheDir,
	}
}

// RequireNix skips t unless Nix can build here: nix, nix-env and git on
// PATH, and a store this process may write (root; no daemon needed). With
// NICO_REQUIRE_NIX=1 (make test sets it) a missing Nix fails t instead.
func RequireNix(t testing.TB) {
	t.Helper()
	var missing []string
	for _, p := range []string{"nix", "nix-env", "git"} {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	reason := ""
	switch {
	case len(missing) > 0:
		reason = fmt.Sprintf("no %s on PATH (Debian packages nix-bin and git; .ci/deps.sh installs them)", strings.Join(missing, ", "))
	case os.Geteuid() != 0:
		if _, err := os.Stat("/nix/var/nix/daemon-socket/socket"); err != nil {
			reason = "not root and no nix-daemon: the store is not writable"
		}
	}
	if reason == "" {
		return
	}
	if os.Getenv("NICO_REQUIRE_NIX") == "1" {
		t.Fatalf("the nixos applier's real-Nix test cannot run, and NICO_REQUIRE_NIX=1: %s", reason)
	}
	t.Skipf("the nixos applier's real-Nix test needs Nix (set NICO_REQUIRE_NIX=1 to fail instead): %s", reason)
}
