package apply_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
	. "github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/apply/applytest"
)

func newTestNixOS(t *testing.T) (*NixOS, *applytest.FakeNixOS, string) {
	f := applytest.New("/nix/store/initial-nixos-system-m1")
	work := t.TempDir()
	secrets := t.TempDir()
	for name, kv := range map[string]map[string]string{"git": {"username": "bot", "password": "s3cret"}, "tls": {"key.pem": "PRIVATE"}} {
		os.MkdirAll(filepath.Join(secrets, name), 0o700)
		for k, v := range kv {
			os.WriteFile(filepath.Join(secrets, name, k), []byte(v), 0o600)
		}
	}
	return NewNixOS(NixOSConfig{WorkDir: work, Runner: f, Gate: fastGate, Secrets: DirSecrets(secrets), AllowFailedUnits: []string{"user@*.service"}}), f, work
}

func spec(rev string) api.NixosConfigurationSpec {
	return api.NixosConfigurationSpec{GitRepo: "https://git.example/fleet", Revision: rev}
}

// TestNixOSBadInput: the node fails with the cause and nothing is switched.
func TestNixOSBadInput(t *testing.T) {
	cases := []struct {
		name  string
		spec  api.NixosConfigurationSpec
		is    error
		cause string
	}{
		{"unknown attribute", api.NixosConfigurationSpec{GitRepo: "https://git.example/fleet", Revision: "good-1", Flake: "#unknown-attr"}, ErrBuild, "does not provide attribute"},
		{"unreachable repository", api.NixosConfigurationSpec{GitRepo: "https://unreachable.example/fleet", Revision: "good-1"}, ErrFetch, "Could not resolve host"},
		{"nonexistent revision", spec("nonexistent"), ErrFetch, "couldn't find remote ref"},
		{"no repository", api.NixosConfigurationSpec{Revision: "good-1"}, ErrInvalid, "gitRepo"},
		{"missing secret", api.NixosConfigurationSpec{GitRepo: "https://git.example/fleet", CredentialsRef: "nope"}, ErrFetch, "nope"},
		{"missing secret key", api.NixosConfigurationSpec{GitRepo: "https://git.example/fleet", Revision: "good-1",
			AdditionalFiles: []api.AdditionalFile{{Path: "k.pem", SecretRef: &api.SecretKeyRef{Name: "tls", Key: "cert.pem"}}}}, ErrInvalid, "cert.pem"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			n, f, _ := newTestNixOS(t)
			_, err := n.Apply(t.Context(), Generation{Machine: "m1", Number: 1, Spec: c.spec})
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.cause) {
				t.Fatalf("err = %v, want %v with %q", err, c.is, c.cause)
			}
			if sw := f.Switched(); len(sw) > 0 || f.Running() != "initial" {
				t.Fatalf("switched: %v, running %s", sw, f.Running())
			}
		})
	}
}

func TestNixOSApply(t *testing.T) {
	t.Run("files, credentials, transient unit", func(t *testing.T) {
		t.Parallel()
		n, f, work := newTestNixOS(t)
		s := spec("good-1")
		s.Flake, s.ConfigurationSubdir, s.CredentialsRef = "#web", "hosts", "git"
		s.AdditionalFiles = []api.AdditionalFile{{Path: "cluster.nix", Inline: "{ }"}, {Path: "secrets/key.pem", SecretRef: &api.SecretKeyRef{Name: "tls", Key: "key.pem"}}}
		r, err := n.Apply(t.Context(), Generation{Machine: "m1", Number: 7, Spec: s})
		if err != nil {
			t.Fatal(err)
		}
		if r.Toplevel != "/nix/store/good-1-nixos-system-web" || r.RebootNeeded {
			t.Fatalf("result %+v", r)
		}
		for p, want := range map[string]string{"cluster.nix": "{ }", "secrets/key.pem": "PRIVATE"} {
			if b, err := os.ReadFile(filepath.Join(work, "gen-7", "hosts", p)); err != nil || string(b) != want {
				t.Fatalf("%s: %q %v", p, b, err)
			}
		}
		want := []string{
			"nix-env -p /nix/var/nix/profiles/system --set /nix/store/good-1-nixos-system-web",
			"systemd-run --unit=nico-activate-7 --wait --collect --property=Type=oneshot /nix/store/good-1-nixos-system-web/bin/switch-to-configuration switch",
		}
		if got := f.Switched(); !slices.Equal(got, want) {
			t.Fatalf("switch calls:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		var fetch string
		for _, c := range f.Calls() {
			if strings.Contains(c, " fetch ") {
				fetch = c
			}
		}
		if !strings.Contains(fetch, "http.extraHeader=Authorization: Basic Ym90OnMzY3JldA==") || !strings.HasSuffix(fetch, "https://git.example/fleet good-1") {
			t.Fatalf("fetch: %s", fetch)
		}
		if f.Profile() != r.Toplevel {
			t.Fatalf("profile %s", f.Profile())
		}
	})
	t.Run("reboot needed", func(t *testing.T) {
		t.Parallel()
		n, _, _ := newTestNixOS(t)
		r, err := n.Apply(t.Context(), Generation{Machine: "m1", Number: 1, Spec: spec("newkernel")})
		if err != nil || !r.RebootNeeded {
			t.Fatalf("%+v %v", r, err)
		}
		// Unchanged and still not rebooted: still reported.
		r, err = n.Apply(t.Context(), Generation{Machine: "m1", Number: 2, Spec: spec("newkernel")})
		if err != nil || !r.Skipped || !r.RebootNeeded {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("boot only sets the default", func(t *testing.T) {
		t.Parallel()
		n, f, _ := newTestNixOS(t)
		s := spec("good-1")
		s.Operation = api.OperationBoot
		r, err := n.Apply(t.Context(), Generation{Machine: "m1", Number: 1, Spec: s})
		if err != nil || !r.RebootNeeded || f.Running() != "initial" || f.Profile() != "/nix/store/good-1-nixos-system-m1" {
			t.Fatalf("%+v %v running %s profile %s", r, err, f.Running(), f.Profile())
		}
	})
	t.Run("test leaves the profile", func(t *testing.T) {
		t.Parallel()
		n, f, _ := newTestNixOS(t)
		s := spec("unhealthy")
		s.Operation = api.OperationTest
		r, err := n.Apply(t.Context(), Generation{Machine: "m1", Number: 1, Spec: s})
		if !errors.Is(err, ErrHealth) || !r.RolledBack || f.Running() != "initial" || f.Profile() != "/nix/store/initial-nixos-system-m1" {
			t.Fatalf("%+v %v running %s profile %s", r, err, f.Running(), f.Profile())
		}
		if last := f.Switched(); !strings.Contains(last[len(last)-1], "--unit=nico-rollback-1 ") || !strings.HasSuffix(last[len(last)-1], "initial-nixos-system-m1/bin/switch-to-configuration test") {
			t.Fatalf("rollback: %v", last)
		}
	})
	t.Run("health failure names the unit and restores the profile", func(t *testing.T) {
		t.Parallel()
		n, f, _ := newTestNixOS(t)
		_, err := n.Apply(t.Context(), Generation{Machine: "m1", Number: 3, Attempt: 1, Spec: spec("unhealthy")})
		if !errors.Is(err, ErrHealth) || !strings.Contains(err.Error(), "app.service") {
			t.Fatalf("err %v", err)
		}
		if f.Profile() != "/nix/store/initial-nixos-system-m1" || f.Running() != "initial" {
			t.Fatalf("profile %s running %s", f.Profile(), f.Running())
		}
		if !strings.Contains(strings.Join(f.Switched(), "\n"), "--unit=nico-activate-3-1 ") {
			t.Fatalf("attempt not in unit name: %v", f.Switched())
		}
	})
	// An agent restarted mid-activation finds the unit left running: it
	// takes that unit's switch and never starts a second activation,
	// whether the unit still runs (Polls), ended between the agent's read
	// of the current system and its wait (Polls 0), or systemd did not
	// answer at first (Unanswered).
	for name, u := range map[string]applytest.Unit{
		"restart during activation waits for the running unit": {Polls: 3},
		"restart after the unit ended takes its switch":        {},
		"restart while systemd does not answer asks again":     {Unanswered: 2, Polls: 2},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			n, f, _ := newTestNixOS(t)
			u.Toplevel = "/nix/store/good-1-nixos-system-m1"
			f.Activating = map[string]*applytest.Unit{"nico-activate-4": &u}
			r, err := n.Apply(t.Context(), Generation{Machine: "m1", Number: 4, Spec: spec("good-1")})
			if err != nil || r.RolledBack || f.Running() != "good-1" {
				t.Fatalf("%+v %v running %s", r, err, f.Running())
			}
			if got := f.Switched(); len(got) != 1 || strings.HasPrefix(got[0], "systemd-run") {
				t.Fatalf("switch calls %q, want the profile's only: no second activation", got)
			}
		})
	}
	t.Run("restart while systemd never answers fails, starting nothing", func(t *testing.T) {
		t.Parallel()
		n, f, _ := newTestNixOS(t)
		f.Activating = map[string]*applytest.Unit{"nico-activate-4": {Toplevel: "/nix/store/good-1-nixos-system-m1", Unanswered: 100}}
		_, err := n.Apply(t.Context(), Generation{Machine: "m1", Number: 4, Spec: spec("good-1")})
		if !errors.Is(err, ErrActivate) || !strings.Contains(err.Error(), "is-active nico-activate-4 answered no unit state 5 times") {
			t.Fatalf("err %v", err)
		}
		for _, c := range f.Switched() {
			if strings.HasPrefix(c, "systemd-run") {
				t.Fatalf("an activation was started: %s", c)
			}
		}
	})
	t.Run("a running unit that does not switch is a failed activation", func(t *testing.T) {
		t.Parallel()
		n, f, _ := newTestNixOS(t)
		f.Activating = map[string]*applytest.Unit{"nico-activate-4": {Toplevel: "/nix/store/initial-nixos-system-m1", Polls: 1}}
		_, err := n.Apply(t.Context(), Generation{Machine: "m1", Number: 4, Spec: spec("good-1")})
		if !errors.Is(err, ErrActivate) || f.Running() != "initial" || f.Profile() != "/nix/store/initial-nixos-system-m1" {
			t.Fatalf("%v running %s profile %s", err, f.Running(), f.Profile())
		}
	})
	t.Run("allowed failed units pass", func(t *testing.T) {
		t.Parallel()
		n, f, _ := newTestNixOS(t)
		f.Noise = true
		if _, err := n.Apply(t.Context(), Generation{Machine: "m1", Number: 1, Spec: spec("good-1")}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestActivationErrorWaitsForTheJournal: journald takes in a failed
// activation's last lines after systemd-run has returned; the error waits
// for the line that says how the unit ended, so it holds the exit status
// and the activation's own message.
func TestActivationErrorWaitsForTheJournal(t *testing.T) {
	t.Parallel()
	n, f, _ := newTestNixOS(t)
	f.JournalLag = 2
	_, err := n.Apply(t.Context(), Generation{Machine: "m1", Number: 3, Spec: spec("broken")})
	if !errors.Is(err, ErrActivate) || !strings.Contains(err.Error(), "status=4") || !strings.Contains(err.Error(), "activating broken failed") {
		t.Fatalf("err = %v, want ErrActivate with the unit's exit status and message", err)
	}
	if reads, syncs := f.JournalReads(); reads != 3 || syncs != 1 {
		t.Fatalf("the journal was read %d times after %d syncs, want 3 reads (two without the end) after one", reads, syncs)
	}
}
