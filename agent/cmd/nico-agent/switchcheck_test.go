package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSwitchCheckCommand: switch-check's help names it and its exit
// codes; it wants exactly the two arguments switch-to-configuration
// passes (exit 2 otherwise); a data-plane host and the override switch at
// once (exit 0) without reaching etcd; a control-plane host keeping a
// member's data with no etcd to ask refuses (exit 3) naming the override.
func TestSwitchCheckCommand(t *testing.T) {
	var help bytes.Buffer
	if code := run([]string{"switch-check", "--help"}, &help); code != 0 || !strings.Contains(help.String(), "nico-agent switch-check") || !strings.Contains(help.String(), "Exit codes (nico-agent switch-check)") {
		t.Fatalf("help: exit %d:\n%s", code, help.String())
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "etcd")
	if err := os.MkdirAll(filepath.Join(data, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	base := []string{"switch-check", "--name", "cp-1", "--etcd.dataDir", data, "--dataDir", dir, "--answer-timeout", "1s",
		"--etcd.clientURL", "https://127.0.0.1:1", "--etcd.endpoints", "https://127.0.0.1:3", "--etcd.peerURL", "https://127.0.0.1:2", "--current-config", filepath.Join(dir, "none.yaml")}
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want int
		says string
	}{
		{"one argument", []string{"--roles", "controlPlane", "/nix/store/new"}, "", 2, "want 2 arguments"},
		{"data plane", []string{"--roles", "worker", "/nix/store/new", "switch"}, "", 0, "no controlPlane role"},
		{"override", []string{"--roles", "controlPlane", "/nix/store/new", "switch"}, "off", 0, "NICO_SWITCH_GUARD=off is set"},
		{"no etcd, a member's data", []string{"--roles", "controlPlane", "/nix/store/new", "switch"}, "", 3, "NICO_SWITCH_GUARD=off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("NICO_SWITCH_GUARD", tc.env)
			var out bytes.Buffer
			if code := run(append(append([]string{}, base...), tc.args...), &out); code != tc.want || !strings.Contains(out.String(), tc.says) {
				t.Fatalf("exit %d, want %d saying %q; output:\n%s", code, tc.want, tc.says, out.String())
			}
		})
	}
}
