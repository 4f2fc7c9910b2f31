// Package applytest holds a fake NixOS machine for the apply package's
// NixOS applier: a Runner that answers git, nix, readlink, nix-env,
// systemd-run and systemctl like a machine would, without Nix.
package applytest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/homystack/nico/pkg/apply"
)

// FakeNixOS is an apply.Runner that behaves like a NixOS machine with git and nix.
// Revisions choose behaviour: "broken" fails activation, "unhealthy" leaves
// a failed unit, "newkernel" changes the kernel, "nonexistent" cannot be
// fetched; a repository containing "unreachable" cannot be reached; the
// attribute "unknown-attr" does not exist in any flake.
type FakeNixOS struct {
	mu        sync.Mutex
	current   string
	booted    string
	profile   string
	checkouts map[string]string
	calls     []string
	// Noise leaves user@1000.service failed (for allow lists).
	Noise bool
	// Activating are transient units still running from before (an agent
	// restarted mid-activation): each answers no unit state Unanswered
	// times (systemd's bus busy), "activating" Polls times, then has
	// switched to Toplevel.
	Activating map[string]*Unit
	// JournalLag is how many reads of a failed activation's journal show
	// only its first line, as a journald that has not taken in the rest.
	JournalLag   int
	failed       string // the unit of the last failed activation
	journalReads int
	journalSyncs int
}

// JournalReads says how often the failed activation's journal was read,
// and how often journald was asked to store what it has.
func (f *FakeNixOS) JournalReads() (reads, syncs int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.journalReads, f.journalSyncs
}

// New returns a machine running the system current (a store path).
func New(current string) *FakeNixOS {
	return &FakeNixOS{current: current, booted: current, profile: current, checkouts: map[string]string{}}
}

// Run implements apply.Runner.
func (f *FakeNixOS) Run(_ context.Context, c apply.Cmd) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c.String())
	a := c.Args
	switch c.Name {
	case "git":
		if a[0] == "init" {
			return nil, nil
		}
		dir := a[1]
		switch {
		case contains(a, "fetch"):
			repo, rev := a[len(a)-2], a[len(a)-1]
			if strings.Contains(repo, "unreachable") {
				return nil, fmt.Errorf("git fetch: exit status 128: fatal: unable to access '%s': Could not resolve host", repo)
			}
			if rev == "nonexistent" {
				return nil, errors.New("git fetch: exit status 128: fatal: couldn't find remote ref nonexistent")
			}
			f.checkouts[dir] = rev
		case contains(a, "rev-parse"):
			return []byte(f.checkouts[dir] + "\n"), nil
		}
		return nil, nil
	case "nix":
		ref := a[len(a)-1]
		path, frag, _ := strings.Cut(strings.TrimPrefix(ref, "path:"), "#")
		attr := strings.Trim(strings.TrimSuffix(strings.TrimPrefix(frag, "nixosConfigurations."), ".config.system.build.toplevel"), `"`)
		if attr == "unknown-attr" {
			return nil, fmt.Errorf("nix build: exit status 1: error: flake 'path:%s' does not provide attribute 'packages.x86_64-linux.%s'", path, frag)
		}
		for dir, rev := range f.checkouts {
			if path == dir || strings.HasPrefix(path, dir+string(filepath.Separator)) {
				top := "/nix/store/" + rev + "-nixos-system-" + attr
				return fmt.Appendf(nil, `[{"drvPath":"%s.drv","outputs":{"out":"%s"}}]`+"\n", top, top), nil
			}
		}
		return nil, fmt.Errorf("nix build: no checkout at %s", path)
	case "readlink":
		p := a[1]
		switch {
		case p == "/run/current-system":
			return []byte(f.current + "\n"), nil
		case strings.HasPrefix(p, "/run/booted-system"+"/"):
			return []byte(kernelOf(f.booted, filepath.Base(p)) + "\n"), nil
		case strings.HasPrefix(p, "/run/current-system"+"/"):
			return []byte(kernelOf(f.current, filepath.Base(p)) + "\n"), nil
		}
		return nil, fmt.Errorf("readlink %s: no such file", p)
	case "nix-env":
		f.profile = a[3]
		return nil, nil
	case "systemd-run":
		top := strings.TrimSuffix(a[len(a)-2], "/bin/switch-to-configuration")
		if strings.Contains(top, "broken") {
			for _, arg := range a {
				if u, ok := strings.CutPrefix(arg, "--unit="); ok {
					f.failed = u
				}
			}
			return nil, errors.New("systemd-run: exit status 1: Job for nico-activate failed: switch-to-configuration exited 4")
		}
		if a[len(a)-1] != "boot" {
			f.current = top
		}
		return nil, nil
	case "journalctl":
		if contains(a, "--sync") {
			f.journalSyncs++
			return nil, nil
		}
		if f.failed == "" || !contains(a, f.failed+".service") {
			return nil, nil
		}
		f.journalReads++
		out := "Starting " + f.failed + ".service - switch-to-configuration...\n"
		if f.journalReads > f.JournalLag {
			out += "activating broken failed\n" + f.failed + ".service: Main process exited, code=exited, status=4/NOPERMISSION\n" +
				f.failed + ".service: Failed with result 'exit-code'.\n"
		}
		return []byte(out), nil
	case "systemctl":
		if a[0] == "is-active" {
			if u := f.Activating[a[1]]; u != nil {
				if u.Unanswered > 0 {
					u.Unanswered--
					return []byte("Failed to connect to bus: Connection timed out\n"), errors.New("systemctl is-active: exit status 1")
				}
				if u.Polls > 0 {
					u.Polls--
					return []byte("activating\n"), nil
				}
				delete(f.Activating, a[1])
				f.current = u.Toplevel
			}
			return []byte("inactive\n"), errors.New("systemctl is-active: exit status 3")
		}
		var out string
		if strings.Contains(f.current, "unhealthy") {
			out += "app.service loaded failed failed The app\n"
		}
		if f.Noise {
			out += "user@1000.service loaded failed failed User Manager\n"
		}
		return []byte(out), nil
	}
	return nil, fmt.Errorf("fake: unknown command %s", c)
}

func kernelOf(top, part string) string {
	if strings.Contains(top, "newkernel") {
		return "/nix/store/k2-" + part
	}
	return "/nix/store/k1-" + part
}

// Switched lists the calls that changed the system.
func (f *FakeNixOS) Switched() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if strings.HasPrefix(c, "nix-env") || strings.HasPrefix(c, "systemd-run") {
			out = append(out, c)
		}
	}
	return out
}

// Running is the revision the running system was built from.
func (f *FakeNixOS) Running() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	rev, _, _ := strings.Cut(strings.TrimPrefix(f.current, "/nix/store/"), "-nixos-system-")
	return rev
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// Profile is the system profile's target.
func (f *FakeNixOS) Profile() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.profile
}

// Calls lists every command run.
func (f *FakeNixOS) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// Unit is a running activation unit.
type Unit struct {
	Toplevel   string
	Polls      int
	Unanswered int
}
