package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/testwait"
)

// TestChangedSettingsReachTheRunningAgent: a bootstrap agent that is ready
// and whose configuration file is then changed (a switch it did not run)
// exits 4, so that systemd (RestartForceExitStatus=4) starts it with the
// new settings; a change that does not load keeps it running.
func TestChangedSettingsReachTheRunningAgent(t *testing.T) {
	dir := t.TempDir()
	peer, client := etcdtest.URLsFor(t, true)
	file := filepath.Join(dir, "agent.yaml")
	settings := func(extra string) string {
		return fmt.Sprintf("name: cp-1\nbootstrap: true\ndataDir: %s\netcd:\n  peerURL: %s\n  clientURL: %s\njoin:\n  listen: 127.0.0.1:%d\nrecovery:\n  listen: \"\"\ngenerations:\n  agentPathFile: %s\n%s",
			dir, peer, client, etcdtest.FreePort(t), filepath.Join(dir, "agent-path"), extra)
	}
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(file+".new", []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(file+".new", file); err != nil {
			t.Fatal(err)
		}
	}
	first := settings("")
	write(first)
	var out logging.Buffer
	code := make(chan int, 1)
	go func() { code <- run([]string{"--config", file}, &out) }()
	waitLog := func(what string) {
		t.Helper()
		testwait.For(t, 60*time.Second, fmt.Sprintf("%q in the log", what), func() (bool, string) {
			select {
			case c := <-code:
				t.Fatalf("nico-agent exited %d before %q:\n%s", c, what, out.String())
			default:
			}
			return strings.Contains(out.String(), what), out.String()
		})
	}
	waitLog("node ready")
	write(strings.Replace(first, "name: cp-1", "name: CP_1", 1))
	waitLog("the new configuration is not valid")
	write(settings("log:\n  level: debug\n"))
	waitExit(t, code, &out, 4, "after its settings changed")
}
