package apply

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// NixOSConfig configures the NixOS applier.
type NixOSConfig struct {
	// WorkDir holds the checkouts, one per generation.
	WorkDir string
	// Profile is the system profile (/nix/var/nix/profiles/system when empty).
	Profile string
	// CurrentSystem and BootedSystem are the links to the running and the
	// booted system (/run/current-system and /run/booted-system when
	// empty); tests on a machine that is not NixOS point them elsewhere.
	CurrentSystem, BootedSystem string
	// Gate holds the user's checks; the applier adds the failed-units check.
	Gate Gate
	// AllowFailedUnits are unit globs that may be failed after activation.
	AllowFailedUnits []string
	Runner           Runner  // ExecRunner when nil
	Secrets          Secrets // nil: specs with secrets fail
	// HostFiles writes the generation's spec.hostFiles before activation
	// (nil: a spec with host files is refused).
	HostFiles *HostFiles
}

// NixOS applies generations by building the flake's toplevel and running
// its switch-to-configuration under a transient systemd unit, so that the
// activation outlives a restart of the agent or of the network.
type NixOS struct {
	cfg NixOSConfig
}

// NewNixOS returns a NixOS applier.
func NewNixOS(cfg NixOSConfig) *NixOS {
	if cfg.Runner == nil {
		cfg.Runner = ExecRunner{}
	}
	if cfg.Profile == "" {
		cfg.Profile = "/nix/var/nix/profiles/system"
	}
	if cfg.CurrentSystem == "" {
		cfg.CurrentSystem = "/run/current-system"
	}
	if cfg.BootedSystem == "" {
		cfg.BootedSystem = "/run/booted-system"
	}
	return &NixOS{cfg: cfg}
}

// Current implements Applier: the store path /run/current-system points to.
func (n *NixOS) Current(ctx context.Context) (string, error) {
	return n.readlink(ctx, n.cfg.CurrentSystem)
}

// Apply implements Applier.
func (n *NixOS) Apply(ctx context.Context, gen Generation) (Result, error) {
	if err := Validate(gen.Spec); err != nil {
		return Result{}, err
	}
	if gen.Spec.GitRepo == "" {
		return Result{}, fmt.Errorf("%w: gitRepo is empty", ErrInvalid)
	}
	op := gen.Spec.Operation
	if op == "" {
		op = api.OperationSwitch
	}
	dir := filepath.Join(n.cfg.WorkDir, "gen-"+strconv.FormatInt(gen.Number, 10))
	if err := n.fetch(ctx, dir, gen.Spec); err != nil {
		return Result{}, err
	}
	flakeDir := filepath.Join(dir, gen.Spec.ConfigurationSubdir)
	if err := n.writeFiles(ctx, flakeDir, gen.Spec.AdditionalFiles); err != nil {
		return Result{}, err
	}
	// Before the build: a flake may read nothing of them, and activation
	// (a unit starting) may need them. Synced even when the toplevel turns
	// out unchanged, so a renewed secret lands.
	if err := n.syncHostFiles(ctx, gen.Spec.HostFiles); err != nil {
		return Result{}, err
	}
	attr := gen.Spec.Attr(gen.Machine)
	// path: so that the untracked additional files are part of the flake.
	ref := fmt.Sprintf("path:%s#nixosConfigurations.%q.config.system.build.toplevel", flakeDir, attr)
	// --json rather than --print-out-paths, which Nix before 2.9 lacks.
	out, err := n.cfg.Runner.Run(ctx, Cmd{Name: "nix", Args: []string{"--extra-experimental-features", "nix-command flakes", "build", "--no-link", "--json", ref}})
	if err != nil {
		return Result{}, fmt.Errorf("%w: nixosConfigurations.%s: %w", ErrBuild, attr, err)
	}
	top, err := builtOut(out)
	if err != nil {
		return Result{}, fmt.Errorf("%w: nixosConfigurations.%s: %w", ErrBuild, attr, err)
	}
	prev, err := n.Current(ctx)
	if err != nil {
		return Result{}, err
	}
	if top == prev && op != api.OperationBoot {
		return Result{Toplevel: top, Skipped: true, RebootNeeded: n.rebootNeeded(ctx)}, nil
	}
	unit := "nico-activate-" + strconv.FormatInt(gen.Number, 10)
	if gen.Attempt > 0 {
		unit += "-" + strconv.Itoa(gen.Attempt)
	}
	if op != api.OperationTest {
		if err := n.setProfile(ctx, top); err != nil {
			return Result{}, fmt.Errorf("%w: %w", ErrActivate, err)
		}
	}
	// An agent restarted during an activation finds its unit still
	// running: wait for it rather than start a second one. The unit may
	// also have ended since the current system was read: it switched.
	resumed, err := n.awaitUnit(ctx, unit)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrActivate, err)
	}
	if !resumed && op != api.OperationBoot {
		if cur, err := n.Current(ctx); err == nil && cur == top {
			resumed = true
		}
	}
	if resumed && op != api.OperationBoot {
		if cur, err := n.Current(ctx); err != nil || cur != top {
			return n.rollback(ctx, gen, prev, op, fmt.Errorf("%w: %s ended without switching to %s", ErrActivate, unit, top))
		}
	} else if err := n.activate(ctx, unit, top, op); err != nil {
		return n.rollback(ctx, gen, prev, op, fmt.Errorf("%w: %w", ErrActivate, err))
	}
	if op == api.OperationBoot {
		return Result{Toplevel: prev, RebootNeeded: true}, nil
	}
	checks := append([]Check{FailedUnits{Runner: n.cfg.Runner, Allow: n.cfg.AllowFailedUnits}}, gen.Checks...)
	if err := n.cfg.Gate.Wait(ctx, checks...); err != nil {
		return n.rollback(ctx, gen, prev, op, err)
	}
	return Result{Toplevel: top, RebootNeeded: n.rebootNeeded(ctx)}, nil
}

// fetch checks out the repository at the spec's revision (or ref).
func (n *NixOS) fetch(ctx context.Context, dir string, s api.NixosConfigurationSpec) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("%w: %w", ErrFetch, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%w: %w", ErrFetch, err)
	}
	want := s.Revision
	if want == "" {
		want = s.Ref
	}
	if want == "" {
		want = "HEAD"
	}
	auth, env, cleanup, err := n.credentials(ctx, dir, s.CredentialsRef)
	if err != nil {
		return err
	}
	defer cleanup()
	steps := []Cmd{
		{Name: "git", Args: []string{"init", "-q", dir}},
		{Name: "git", Args: append(append([]string{"-C", dir}, auth...), "fetch", "-q", "--depth=1", s.GitRepo, want), Env: env},
		{Name: "git", Args: []string{"-C", dir, "checkout", "-q", "--detach", "FETCH_HEAD"}},
	}
	for _, c := range steps {
		if _, err := n.cfg.Runner.Run(ctx, c); err != nil {
			return fmt.Errorf("%w: %s at %s: %w", ErrFetch, s.GitRepo, want, err)
		}
	}
	if s.Revision != "" {
		out, err := n.cfg.Runner.Run(ctx, Cmd{Name: "git", Args: []string{"-C", dir, "rev-parse", "HEAD"}})
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrFetch, s.GitRepo, err)
		}
		if got := lastLine(out); !strings.HasPrefix(got, s.Revision) {
			return fmt.Errorf("%w: %s: fetched %s, want revision %s", ErrFetch, s.GitRepo, got, s.Revision)
		}
	}
	return nil
}

// credentials turns a secret into git arguments and environment: an HTTP
// basic header from username and password, or an SSH key file.
func (n *NixOS) credentials(ctx context.Context, dir, ref string) (args, env []string, cleanup func(), err error) {
	cleanup = func() {}
	if ref == "" {
		return nil, nil, cleanup, nil
	}
	if n.cfg.Secrets == nil {
		return nil, nil, cleanup, fmt.Errorf("%w: credentialsRef %q: no secret store configured", ErrInvalid, ref)
	}
	sec, err := n.cfg.Secrets.Secret(ctx, ref)
	if err != nil {
		return nil, nil, cleanup, fmt.Errorf("%w: credentialsRef %q: %w", ErrFetch, ref, err)
	}
	if key, ok := sec["sshPrivateKey"]; ok {
		f := filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".key")
		if err := os.WriteFile(f, key, 0o600); err != nil {
			return nil, nil, cleanup, fmt.Errorf("%w: %w", ErrFetch, err)
		}
		return nil, []string{"GIT_SSH_COMMAND=ssh -i " + f + " -o IdentitiesOnly=yes"}, func() { os.Remove(f) }, nil
	}
	user, pass := sec["username"], sec["password"]
	if pass == nil {
		return nil, nil, cleanup, fmt.Errorf("%w: credentialsRef %q: want keys username and password, or sshPrivateKey", ErrInvalid, ref)
	}
	basic := base64.StdEncoding.EncodeToString([]byte(string(user) + ":" + string(pass)))
	return []string{"-c", "http.extraHeader=Authorization: Basic " + basic}, nil, cleanup, nil
}

// writeFiles writes the additional files into the flake.
func (n *NixOS) writeFiles(ctx context.Context, flakeDir string, files []api.AdditionalFile) error {
	for _, f := range files {
		content := []byte(f.Inline)
		if f.SecretRef != nil {
			if n.cfg.Secrets == nil {
				return fmt.Errorf("%w: %s: no secret store configured", ErrInvalid, f.Path)
			}
			sec, err := n.cfg.Secrets.Secret(ctx, f.SecretRef.Name)
			if err != nil {
				return fmt.Errorf("%w: %s: %w", ErrFetch, f.Path, err)
			}
			v, ok := sec[f.SecretRef.Key]
			if !ok {
				return fmt.Errorf("%w: %s: secret %s has no key %q", ErrInvalid, f.Path, f.SecretRef.Name, f.SecretRef.Key)
			}
			content = v
		}
		p := filepath.Join(flakeDir, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("%w: %w", ErrFetch, err)
		}
		if err := os.WriteFile(p, content, 0o600); err != nil {
			return fmt.Errorf("%w: %w", ErrFetch, err)
		}
	}
	return nil
}

// syncHostFiles writes files with the configured HostFiles.
func (n *NixOS) syncHostFiles(ctx context.Context, files []api.HostFile) error {
	if n.cfg.HostFiles == nil {
		if len(files) > 0 {
			return fmt.Errorf("%w: hostFiles: %d listed, but this agent's nixos applier writes no host files (configure its host-file roots)", ErrInvalid, len(files))
		}
		return nil
	}
	_, err := n.cfg.HostFiles.Sync(ctx, files)
	return err
}

func (n *NixOS) setProfile(ctx context.Context, top string) error {
	_, err := n.cfg.Runner.Run(ctx, Cmd{Name: "nix-env", Args: []string{"-p", n.cfg.Profile, "--set", top}})
	return err
}

// activate runs switch-to-configuration in a transient unit and waits for
// it. Its output goes to the journal, not to a pipe to the agent (a
// restarted agent must not break the activation), so a failure's error
// holds systemd-run's summary (the exit status) and the end of the unit's
// journal: --collect leaves no unit to ask.
func (n *NixOS) activate(ctx context.Context, unit, top string, op api.ActivationOp) error {
	_, err := n.cfg.Runner.Run(ctx, Cmd{Name: "systemd-run", Args: []string{
		"--unit=" + unit, "--wait", "--collect", "--property=Type=oneshot",
		top + "/bin/switch-to-configuration", string(op)}})
	if err == nil {
		return nil
	}
	if j := n.failedUnitJournal(ctx, unit); j != "" {
		return fmt.Errorf("%w; journal of %s: %s", err, unit, tail(j, 600))
	}
	return err
}

// unitEndMarks are parts of the lines systemd logs when a unit's process
// fails: once one is in the journal, the lines the process logged before
// it are too.
var unitEndMarks = []string{"Failed with result", "Main process exited", "Control process exited"}

// journalTries and journalEvery bound the wait for journald to take in a
// failed unit's last lines: it reads them from its sockets on its own
// time, after systemd-run has returned.
const (
	journalTries = 10
	journalEvery = 200 * time.Millisecond
)

// failedUnitJournal is the end of a failed unit's journal ("" when there
// is none), read once journald shows how the unit ended, or as it is
// after journalTries reads.
func (n *NixOS) failedUnitJournal(ctx context.Context, unit string) string {
	// Ask journald to store what it has received (errors are ignored:
	// the reads below say what there is).
	_, _ = n.cfg.Runner.Run(ctx, Cmd{Name: "journalctl", Args: []string{"--sync"}})
	j := ""
	for try := range journalTries {
		out, err := n.cfg.Runner.Run(ctx, Cmd{Name: "journalctl", Args: []string{"--no-pager", "--quiet", "-o", "cat", "-n", "10", "-u", unit + ".service"}})
		if err != nil {
			return j
		}
		j = strings.TrimSpace(string(out))
		if j == "" || slices.ContainsFunc(unitEndMarks, func(m string) bool { return strings.Contains(j, m) }) || try == journalTries-1 {
			return j
		}
		select {
		case <-ctx.Done():
			return j
		case <-time.After(journalEvery):
		}
	}
	return j
}

// awaitUnknownAnswers is how many answers of systemctl is-active in a row
// that name no unit state awaitUnit takes before it fails.
const awaitUnknownAnswers = 5

// awaitUnit waits until unit, when it is running, has ended; it reports
// whether the unit was running. An answer that is no unit state (systemd
// busy, its bus not answering) is asked again, awaitUnknownAnswers times
// at most: taken for "not running", it would start a second activation.
func (n *NixOS) awaitUnit(ctx context.Context, unit string) (bool, error) {
	was := false
	unknown := 0
	for {
		out, _ := n.cfg.Runner.Run(ctx, Cmd{Name: "systemctl", Args: []string{"is-active", unit}})
		switch state := lastLine(out); state {
		case "active", "activating", "deactivating", "reloading", "refreshing":
			was, unknown = true, 0
		case "inactive", "failed", "unknown":
			return was, nil
		default:
			if unknown++; unknown >= awaitUnknownAnswers {
				return was, fmt.Errorf("systemctl is-active %s answered no unit state %d times, last %q", unit, unknown, state)
			}
		}
		select {
		case <-ctx.Done():
			return was, ctx.Err()
		case <-time.After(n.cfg.Gate.interval()):
		}
	}
}

// rollback restores prev (profile and activation) and returns cause.
func (n *NixOS) rollback(ctx context.Context, gen Generation, prev string, op api.ActivationOp, cause error) (Result, error) {
	if prev == "" || ctx.Err() != nil {
		return Result{}, cause
	}
	if op != api.OperationTest {
		if err := n.setProfile(ctx, prev); err != nil {
			return Result{}, errors.Join(cause, fmt.Errorf("%w: %w", ErrRollback, err))
		}
	}
	// The restored system finds the files of the generation it ran.
	if n.cfg.HostFiles != nil {
		if _, err := n.cfg.HostFiles.Revert(ctx); err != nil {
			return Result{}, errors.Join(cause, fmt.Errorf("%w: host files: %w", ErrRollback, err))
		}
	}
	unit := "nico-rollback-" + strconv.FormatInt(gen.Number, 10)
	if gen.Attempt > 0 {
		unit += "-" + strconv.Itoa(gen.Attempt)
	}
	if err := n.activate(ctx, unit, prev, op); err != nil {
		return Result{}, errors.Join(cause, fmt.Errorf("%w: %w", ErrRollback, err))
	}
	return Result{Toplevel: prev, RolledBack: true, RebootNeeded: n.rebootNeeded(ctx)}, cause
}

// rebootNeeded compares the booted kernel, initrd and modules with the
// current system's.
func (n *NixOS) rebootNeeded(ctx context.Context) bool {
	for _, part := range []string{"kernel", "initrd", "kernel-modules"} {
		b, err1 := n.readlink(ctx, n.cfg.BootedSystem+"/"+part)
		c, err2 := n.readlink(ctx, n.cfg.CurrentSystem+"/"+part)
		if err1 == nil && err2 == nil && b != c {
			return true
		}
	}
	return false
}

// builtOut is the out path of the one derivation nix build --json built.
func builtOut(out []byte) (string, error) {
	var built []struct {
		Outputs map[string]string `json:"outputs"`
	}
	if err := json.Unmarshal(out, &built); err != nil {
		return "", fmt.Errorf("nix build --json: %w: %q", err, tail(string(out), 200))
	}
	if len(built) != 1 || built[0].Outputs["out"] == "" {
		return "", fmt.Errorf("nix build --json: want one derivation with an out output, got %q", tail(string(out), 200))
	}
	return built[0].Outputs["out"], nil
}

func (n *NixOS) readlink(ctx context.Context, p string) (string, error) {
	out, err := n.cfg.Runner.Run(ctx, Cmd{Name: "readlink", Args: []string{"-f", p}})
	if err != nil {
		return "", fmt.Errorf("apply: readlink %s: %w", p, err)
	}
	return lastLine(out), nil
}
