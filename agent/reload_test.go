package agent

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/testwait"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	// Written aside and renamed, as /etc is switched: never half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// reloadHost is a running agent's files: its binary (and the running
// process's view of it), its configuration and the installed agent path.
type reloadHost struct {
	dir, exe, running, config, agentPath string
}

func newReloadHost(t *testing.T) reloadHost {
	dir := t.TempDir()
	h := reloadHost{dir: dir, exe: filepath.Join(dir, "bin", "nico-agent"), running: filepath.Join(dir, "proc-self-exe"),
		config: filepath.Join(dir, "etc", "agent.yaml"), agentPath: filepath.Join(dir, "etc", "agent-path")}
	writeFile(t, h.exe, "#!old")
	// The running process's binary is the file at exe when it started.
	if err := os.Link(h.exe, h.running); err != nil {
		t.Fatal(err)
	}
	writeFile(t, h.config, "name: cp-1\n")
	writeFile(t, h.agentPath, h.exe+"\n")
	return h
}

func (h reloadHost) watch(valid func() error) ReloadWatch {
	return ReloadWatch{ConfigFile: h.config, Valid: valid, AgentPathFile: h.agentPath, RunningExe: h.running,
		Executable: func() (string, error) { return h.exe, nil }, Interval: 5 * time.Millisecond}
}

// TestReloaderSeesWhatASwitchChanged: nothing changed is no restart; a
// changed configuration file, another installed nico-agent, or the
// binary replaced in place is; a changed configuration that does not load
// is not (and is logged once); an agent path that named another binary
// already at start is no restart either (no restart loop).
func TestReloaderSeesWhatASwitchChanged(t *testing.T) {
	log := logging.Test(t)
	t.Run("nothing changed", func(t *testing.T) {
		h := newReloadHost(t)
		if why := NewReloader(h.watch(nil), log).changed(); why != "" {
			t.Errorf("changed() = %q", why)
		}
	})
	t.Run("configuration", func(t *testing.T) {
		h := newReloadHost(t)
		var bad atomic.Bool
		bad.Store(true)
		calls := 0
		r := NewReloader(h.watch(func() error {
			calls++
			if bad.Load() {
				return errors.New("name: \"CP_1\" is not a DNS label")
			}
			return nil
		}), log)
		writeFile(t, h.config, "name: CP_1\n")
		for range 2 {
			if why := r.changed(); why != "" {
				t.Errorf("a configuration that does not load: changed() = %q", why)
			}
		}
		if calls != 1 {
			t.Errorf("the refused configuration was checked %d times, want once", calls)
		}
		bad.Store(false)
		writeFile(t, h.config, "name: cp-one\n")
		if why := r.changed(); !strings.Contains(why, "configuration file") {
			t.Errorf("changed() = %q, want the configuration file", why)
		}
	})
	t.Run("installed agent", func(t *testing.T) {
		h := newReloadHost(t)
		r := NewReloader(h.watch(nil), log)
		next := filepath.Join(h.dir, "store-b", "nico-agent")
		writeFile(t, next, "#!new")
		writeFile(t, h.agentPath, next+"\n")
		if why := r.changed(); !strings.Contains(why, "another nico-agent") {
			t.Errorf("changed() = %q, want another nico-agent", why)
		}
	})
	t.Run("installed agent differs already at start", func(t *testing.T) {
		h := newReloadHost(t)
		other := filepath.Join(h.dir, "store-b", "nico-agent")
		writeFile(t, other, "#!other")
		writeFile(t, h.agentPath, other+"\n")
		if why := NewReloader(h.watch(nil), log).changed(); why != "" {
			t.Errorf("changed() = %q", why)
		}
	})
	t.Run("binary replaced in place", func(t *testing.T) {
		h := newReloadHost(t)
		r := NewReloader(h.watch(nil), log)
		writeFile(t, h.exe, "#!new")
		if why := r.changed(); !strings.Contains(why, "was replaced") {
			t.Errorf("changed() = %q, want the binary replaced", why)
		}
	})
}

// blockingApplier applies until released.
type blockingApplier struct {
	entered chan struct{}
	release chan struct{}
	upgrade chan struct{} // the agent's: empty while applying, or the restart came mid-apply
	early   atomic.Bool
}

func (b *blockingApplier) Apply(ctx context.Context, gen apply.Generation) (apply.Result, error) {
	b.entered <- struct{}{}
	<-b.release
	if len(b.upgrade) > 0 {
		b.early.Store(true)
	}
	return apply.Result{}, nil
}

func (b *blockingApplier) Current(context.Context) (string, error) { return "", nil }

// TestReloaderRestartsBetweenApplies: a configuration changed while a
// generation is applied restarts the agent (ErrUpgraded through its
// upgrade request) only once the apply is done, and no generation is
// applied after that.
func TestReloaderRestartsBetweenApplies(t *testing.T) {
	h := newReloadHost(t)
	var logs logging.Buffer
	r := NewReloader(h.watch(nil), slog.New(slog.NewTextHandler(&logs, nil)))
	a := New(Config{Name: "cp-1"}, nil, nil, logging.Test(t))
	b := &blockingApplier{entered: make(chan struct{}), release: make(chan struct{}), upgrade: a.supervisor.woken}
	ap := r.Guard(b)
	applied := make(chan error, 1)
	go func() { _, err := ap.Apply(t.Context(), apply.Generation{Number: 1}); applied <- err }()
	<-b.entered

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); _ = a.rt.Run(ctx, r.Controller(a)) }()
	writeFile(t, h.config, "name: cp-1\nlog:\n  level: debug\n")
	testwait.For(t, 30*time.Second, "the change seen", func() (bool, string) {
		return strings.Contains(logs.String(), "restarting the agent"), logs.String()
	})
	close(b.release)
	if err := <-applied; err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.supervisor.woken:
	case <-time.After(30 * time.Second):
		t.Fatal("no restart after the apply")
	}
	if b.early.Load() {
		t.Error("the restart was asked for while a generation was applied")
	}
	cancel()
	<-done
	actx, acancel := context.WithCancel(t.Context())
	next := make(chan error, 1)
	go func() { _, err := ap.Apply(actx, apply.Generation{Number: 2}); next <- err }()
	acancel()
	if err := <-next; !errors.Is(err, context.Canceled) {
		t.Errorf("an apply after the restart was asked for: %v, want context.Canceled without applying", err)
	}
}
