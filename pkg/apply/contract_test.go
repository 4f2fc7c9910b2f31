package apply_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	. "github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/apply/applytest"
)

// subject is one Applier under the contract, with a way to see which
// revision the machine really runs.
type subject struct {
	applier Applier
	running func() string
	// spec is the spec of a revision by name (a fake repository's when nil).
	spec func(rev string) api.NixosConfigurationSpec
}

// fastGate bounds the health gate in tests.
var fastGate = Gate{Deadline: 3 * time.Second, Interval: 50 * time.Millisecond}

func execSubject(t *testing.T) subject {
	dir := t.TempDir()
	state := filepath.Join(dir, "running")
	script := `[ "$NICO_ACTION" = rollback ] || [ "$NICO_REVISION" != broken ] || { echo "activation of broken failed" >&2; exit 3; }
echo "${NICO_REVISION:-initial}" > ` + state
	gate := fastGate
	gate.Checks = []Check{CommandCheck{Runner: ExecRunner{}, Cmd: Cmd{Name: "sh", Args: []string{"-c", "! grep -qx unhealthy " + state}}}}
	x, err := NewExec(ExecConfig{Command: []string{"sh", "-c", script}, Gate: gate, StateFile: filepath.Join(dir, "state.json")})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(state, []byte("initial\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return subject{applier: x, running: func() string {
		b, _ := os.ReadFile(state)
		return strings.TrimSpace(string(b))
	}}
}

func nixosSubject(t *testing.T) subject {
	f := applytest.New("/nix/store/initial-nixos-system-m1")
	n := NewNixOS(NixOSConfig{WorkDir: t.TempDir(), Runner: f, Gate: fastGate})
	return subject{applier: n, running: f.Running}
}

// TestApplierContract runs the same cases against both appliers.
func TestApplierContract(t *testing.T) {
	for name, mk := range map[string]func(*testing.T) subject{"exec": execSubject, "nixos": nixosSubject, "nixos-real-nix": realNixSubject} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := mk(t)
			ctx := t.Context()
			gen := func(n int64, rev string) Generation {
				spec := api.NixosConfigurationSpec{GitRepo: "https://git.example/fleet", Revision: rev}
				if s.spec != nil {
					spec = s.spec(rev)
				}
				spec.Generation = n
				return Generation{Machine: "m1", Number: n, Spec: spec}
			}
			must := func(r Result, err error) Result {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			r1 := must(s.applier.Apply(ctx, gen(1, "good-1")))
			if r1.Skipped || r1.RolledBack || s.running() != "good-1" {
				t.Fatalf("apply good-1: %+v, running %s", r1, s.running())
			}
			if cur, _ := s.applier.Current(ctx); cur != r1.Toplevel {
				t.Fatalf("current %q, applied %q", cur, r1.Toplevel)
			}
			// The same system again is skipped.
			if r := must(s.applier.Apply(ctx, gen(2, "good-1"))); !r.Skipped || r.Toplevel != r1.Toplevel {
				t.Fatalf("unchanged generation: %+v", r)
			}
			r3 := must(s.applier.Apply(ctx, gen(3, "good-2")))
			if r3.Toplevel == r1.Toplevel || s.running() != "good-2" {
				t.Fatalf("apply good-2: %+v, running %s", r3, s.running())
			}
			// Unhealthy: rolled back to good-2, ErrHealth.
			r, err := s.applier.Apply(ctx, gen(4, "unhealthy"))
			if !errors.Is(err, ErrHealth) || !r.RolledBack || s.running() != "good-2" {
				t.Fatalf("unhealthy: %+v %v, running %s", r, err, s.running())
			}
			if cur, _ := s.applier.Current(ctx); cur != r3.Toplevel {
				t.Fatalf("current after rollback %q, want %q", cur, r3.Toplevel)
			}
			// Activation fails: rolled back, ErrActivate.
			r, err = s.applier.Apply(ctx, gen(5, "broken"))
			if !errors.Is(err, ErrActivate) || s.running() != "good-2" {
				t.Fatalf("broken: %+v %v, running %s", r, err, s.running())
			}
			if cur, _ := s.applier.Current(ctx); cur != r3.Toplevel {
				t.Fatalf("current after failed activation %q, want %q", cur, r3.Toplevel)
			}
			// Bad input is refused before anything runs.
			bad := gen(6, "good-3")
			bad.Spec.Operation = "reboot"
			if _, err := s.applier.Apply(ctx, bad); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "reboot") || s.running() != "good-2" {
				t.Fatalf("bad operation: %v", err)
			}
			bad = gen(7, "good-3")
			bad.Spec.AdditionalFiles = []api.AdditionalFile{{Path: "../escape", Inline: "x"}}
			if _, err := s.applier.Apply(ctx, bad); !errors.Is(err, ErrInvalid) || s.running() != "good-2" {
				t.Fatalf("escaping file: %v", err)
			}
			// A cancelled apply returns the context's error.
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if _, err := s.applier.Apply(cctx, gen(8, "unhealthy")); err == nil {
				t.Fatal("cancelled apply succeeded")
			}
		})
	}
}
