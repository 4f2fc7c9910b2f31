package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
)

// writeBootstrapConfig writes dir/agent.yaml, the settings of a bootstrap
// control-plane agent cp-1 with its data in dir on fresh https loopback
// URLs, its recovery API and /metrics on the given listen addresses ("":
// off), and returns the file's path.
func writeBootstrapConfig(t *testing.T, dir, recoveryListen, metricsListen string) string {
	t.Helper()
	file, _, _ := writeBootstrapSettings(t, dir, recoveryListen, metricsListen)
	return file
}

// writeBootstrapSettings is writeBootstrapConfig that also returns the
// member's peer and client URLs.
func writeBootstrapSettings(t *testing.T, dir, recoveryListen, metricsListen string) (file, peer, client string) {
	t.Helper()
	peer, client = etcdtest.URLsFor(t, true)
	file = filepath.Join(dir, "agent.yaml")
	settings := fmt.Sprintf("name: cp-1\nbootstrap: true\ndataDir: %s\netcd:\n  peerURL: %s\n  clientURL: %s\njoin:\n  listen: 127.0.0.1:%d\nrecovery:\n  listen: %q\ngenerations:\n  agentPathFile: %s\nmetrics:\n  listen: %q\n",
		dir, peer, client, etcdtest.FreePort(t), recoveryListen, filepath.Join(dir, "agent-path"), metricsListen)
	if err := os.WriteFile(file, []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, peer, client
}

// stopAgent sends the test process SIGTERM (what systemd sends) and waits
// for run to return 0.
func stopAgent(t *testing.T, code chan int, out *logging.Buffer) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, code, out, 0, "after SIGTERM")
}

// waitExit waits up to a minute for run's exit code on code and fails the
// test unless it is want; after says what the exit follows, for the
// failure (with run's log, out).
func waitExit(t *testing.T, code chan int, out *logging.Buffer, want int, after string) {
	t.Helper()
	select {
	case c := <-code:
		if c != want {
			t.Fatalf("exit %d %s, want %d:\n%s", c, after, want, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("nico-agent still runs %s:\n%s", after, out.String())
	}
}
