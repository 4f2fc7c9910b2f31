package systemd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/tests/systemd/harness"
)

// The test flake: nixosConfigurations.cp1.config.system.build.toplevel is
// a derivation built offline with /bin/sh, whose bin/switch-to-configuration
// records its call in /var/lib/nico-test/activations and, unless the
// generation is bad, points /run/current-system at itself, as NixOS's does.
const (
	testFlake = `{
  outputs = { self }: {
    nixosConfigurations.cp1.config.system.build.toplevel = derivation {
      name = "nixos-system-cp1-GEN";
      system = "x86_64-linux";
      builder = "/bin/sh";
      args = [ "-c" (builtins.readFile ./build.sh) ];
      gen = "GEN";
      exitCode = "CODE";
    };
  };
}
`
	testBuild = `/bin/mkdir -p $out/bin
/bin/cat > $out/bin/switch-to-configuration <<STC
#!/bin/sh
/bin/mkdir -p /var/lib/nico-test
echo "\$1 $gen" >> /var/lib/nico-test/activations
[ "$exitCode" = 0 ] || { echo "activation of $gen failed" >&2; exit $exitCode; }
/bin/ln -sfn $out /run/current-system
STC
/bin/chmod +x $out/bin/switch-to-configuration
`
)

// nixBinds put Debian's nix (2.8) where the guest's rendered PATHs look
// for nix (the package store paths of the fixture).
func nixBinds(pk map[string]string) []harness.Bind {
	var binds []harness.Bind
	for _, p := range []string{"coreutils", "findutils", "gnugrep", "gnused", "systemd", "bash", "nix", "git"} {
		binds = append(binds, harness.Bind{Src: "/usr/bin/nix", Dst: pk[p] + "/bin/nix", RO: true})
	}
	return binds
}

func flakeOf(gen string, code int) string {
	return strings.NewReplacer("GEN", gen, "CODE", fmt.Sprint(code)).Replace(testFlake)
}

// fleetRepo makes a git repository with one commit per generation and
// returns its directory and the commits' revisions.
func fleetRepo(t *testing.T, gens []string, codes []int) (string, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fleet")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.org")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git("init", "-q")
	git("config", "uploadpack.allowAnySHA1InWant", "true")
	var revs []string
	for i, g := range gens {
		if err := os.WriteFile(filepath.Join(dir, "flake.nix"), []byte(flakeOf(g, codes[i])), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "build.sh"), []byte(testBuild), 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", "flake.nix", "build.sh")
		git("commit", "-q", "-m", g)
		revs = append(revs, git("rev-parse", "HEAD"))
	}
	return dir, revs
}

// TestNixOSApplier rolls generations onto the bootstrap host with the
// `nixos` applier and real Nix (Debian's nix-bin) and systemd: the agent
// fetches the revision from a git repository, builds the toplevel with
// nix build under its unit's sandbox (ProtectHome=read-only: Nix's cache
// must live elsewhere, defect 9), sets the system profile, runs
// switch-to-configuration under systemd-run --wait and passes the health
// gate; the same revision again activates nothing; a generation whose activation
// fails is rolled back (profile and system) and halts its rollout.
func TestNixOSApplier(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	repo, revs := fleetRepo(t, []string{"gen1", "gen2"}, []int{0, 1})
	c := newCluster(t)
	cp1 := c.boot(ctx, "cp1-nixos", func(cfg *harness.Config) {
		cfg.Binds = append(cfg.Binds, harness.Bind{Src: repo, Dst: "/srv/fleet", RO: true})
		cfg.Binds = append(cfg.Binds, nixBinds(c.fx.Packages)...)
		// The system the host runs before any rollout.
		cfg.Files["/srv/gen0/flake.nix"] = harness.File{Data: []byte(flakeOf("gen0", 0))}
		cfg.Files["/srv/gen0/build.sh"] = harness.File{Data: []byte(testBuild)}
	})
	out, err := cp1.sh(ctx, "set -e; nix --extra-experimental-features 'nix-command flakes' build -o /tmp/gen0 'path:/srv/gen0#nixosConfigurations.cp1.config.system.build.toplevel'; "+
		"top=$(readlink /tmp/gen0); nix-env -p /nix/var/nix/profiles/system --set $top; $top/bin/switch-to-configuration switch; readlink /run/current-system")
	if err != nil {
		t.Fatalf("installing gen0: %v: %s", err, out)
	}
	mustStart(ctx, t, cp1, "nico-agent.service")
	mustStart(ctx, t, cp1, "nico-coordinator.service")

	system := func() (current, profile string) {
		out, err := cp1.sh(ctx, "readlink /run/current-system; readlink -f /nix/var/nix/profiles/system")
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		f := strings.Fields(out)
		if len(f) != 2 {
			t.Fatalf("current system and profile: %q", out)
		}
		return f[0], f[1]
	}
	activations := func() string {
		out, _ := cp1.Exec(ctx, "cat", "/var/lib/nico-test/activations")
		return strings.TrimSpace(string(out))
	}
	roll := func(name, rev, want string) {
		t.Helper()
		if out, err := cp1.sh(ctx, "nicoctl rollout start "+name+" --git-repo file:///srv/fleet --revision "+rev+" --step-timeout 2m"); err != nil {
			t.Fatalf("nicoctl rollout start %s: %v: %s", name, err, out)
		}
		var phase string
		cp1.waitFor(ctx, "rollout "+name+" ends", func() error {
			out, err := cp1.sh(ctx, "nicoctl rollout status "+name+" -o json")
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			for _, p := range []string{"Succeeded", "Halted"} {
				if strings.Contains(out, `"phase": "`+p+`"`) {
					phase = p
					return nil
				}
			}
			return fmt.Errorf("%w: %s", errNotYet, out)
		})
		if phase != want {
			t.Fatalf("rollout %s %s, want %s\n%s", name, phase, want, cp1.journal(ctx, 60))
		}
	}

	t.Run("Switch", func(t *testing.T) {
		roll("g1", revs[0], "Succeeded")
		cur, prof := system()
		if !strings.HasSuffix(cur, "-nixos-system-cp1-gen1") || prof != cur {
			t.Fatalf("after g1: current system %s, profile %s; want gen1 for both", cur, prof)
		}
		if got := activations(); got != "switch gen0\nswitch gen1" {
			t.Fatalf("activations %q", got)
		}
		out, _ := cp1.Exec(ctx, "journalctl", "--no-pager", "-o", "cat", "-u", "nico-activate-*")
		t.Logf("the activation's unit logged: %q", out)
	})
	if t.Failed() {
		return
	}
	t.Run("SameRevisionActivatesNothing", func(t *testing.T) {
		roll("g1-again", revs[0], "Succeeded")
		if got := activations(); got != "switch gen0\nswitch gen1" {
			t.Fatalf("activations %q, want no new one", got)
		}
	})
	t.Run("FailedActivationRollsBack", func(t *testing.T) {
		roll("g2", revs[1], "Halted")
		cur, prof := system()
		if !strings.HasSuffix(cur, "-nixos-system-cp1-gen1") || prof != cur {
			t.Fatalf("after the failed g2: current system %s, profile %s; want gen1 for both", cur, prof)
		}
		if got := activations(); got != "switch gen0\nswitch gen1\nswitch gen2\nswitch gen1" {
			t.Fatalf("activations %q, want gen2's then gen1's again", got)
		}
	})
}
