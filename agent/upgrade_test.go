package agent

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/homystack/nico/pkg/logging"
)

// TestNewAgentBinary: the agent restarts only when the generation's agent
// path names another file than the running executable, symlinks resolved;
// never on a missing, empty or unreadable answer.
func TestNewAgentBinary(t *testing.T) {
	dir := t.TempDir()
	running := filepath.Join(dir, "store-a", "nico-agent")
	other := filepath.Join(dir, "store-b", "nico-agent")
	for _, p := range []string{running, other} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "current-agent")
	if err := os.Symlink(running, link); err != nil {
		t.Fatal(err)
	}
	pathFile := filepath.Join(dir, "agent-path")
	for _, c := range []struct {
		name     string
		file     *string // nil: no file
		exe      string
		exeErr   error
		disabled bool
		want     bool
	}{
		{name: "same path", file: ptr(running + "\n"), exe: running},
		{name: "same file through a symlink", file: ptr(link), exe: running},
		{name: "another store path", file: ptr(other + "\n"), exe: running, want: true},
		{name: "installed binary gone", file: ptr(filepath.Join(dir, "gone", "nico-agent")), exe: running, want: true},
		{name: "no file", exe: running},
		{name: "empty file", file: ptr("\n"), exe: running},
		{name: "executable unknown", file: ptr(other), exeErr: errors.New("no /proc")},
		{name: "disabled", file: ptr(other), exe: running, disabled: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			_ = os.Remove(pathFile)
			if c.file != nil {
				if err := os.WriteFile(pathFile, []byte(*c.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfg := Config{Name: "n1", AgentPathFile: pathFile}
			if c.disabled {
				cfg.AgentPathFile = ""
			}
			a := New(cfg, nil, nil, logging.Test(t))
			a.Executable = func() (string, error) { return c.exe, c.exeErr }
			if _, got := a.newAgentBinary(); got != c.want {
				t.Fatalf("newAgentBinary = %v, want %v", got, c.want)
			}
			// A restart is asked for only after an apply that was not
			// skipped, and only once.
			if got := a.upgraded(a.log, true); got {
				t.Fatal("a skipped apply asked for a restart")
			}
			if got := a.upgraded(a.log, false); got != c.want {
				t.Fatalf("upgraded = %v, want %v", got, c.want)
			}
			_ = a.upgraded(a.log, false)
			if n := len(a.supervisor.woken); (n == 1) != c.want {
				t.Fatalf("%d restart requests queued, want %v", n, c.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }
