package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadInputExitsTwoNamingKeyValueAndAccepted: every invalid setting stops
// the agent before it does anything, with exit code 2 and a message naming
// the key, the value and what is accepted; several mistakes are all reported.
func TestBadInputExitsTwoNamingKeyValueAndAccepted(t *testing.T) {
	file := filepath.Join(t.TempDir(), "nico.yaml")
	if err := os.WriteFile(file, []byte("etcd:\n  peerAddress: http://127.0.0.1:2380\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"runtime", []string{"--bootstrap", "--etcd.runtime", "podman"}, []string{"etcd.runtime", `"podman"`, "embedded", "exec"}},
		{"role", []string{"--bootstrap", "--roles", "controlPlane,db"}, []string{"roles", `"db"`, "controlPlane", "worker"}},
		{"name", []string{"--bootstrap", "--name", "Bad_Name"}, []string{"name", `"Bad_Name"`, "DNS"}},
		{"peer URL", []string{"--bootstrap", "--etcd.peerURL", "127.0.0.1:2380"}, []string{"etcd.peerURL", "127.0.0.1:2380", "http"}},
		{"ttl", []string{"--bootstrap", "--heartbeat.ttl", "1s"}, []string{"heartbeat.ttl", "1s"}},
		{"no endpoints", []string{}, []string{"etcd.endpoints", "bootstrap"}},
		{"bootstrap worker", []string{"--bootstrap", "--roles", "worker"}, []string{"bootstrap", "controlPlane"}},
		{"two at once", []string{"--bootstrap", "--etcd.runtime", "podman", "--log.level", "loud"}, []string{"etcd.runtime", "log.level", `"loud"`}},
		{"unknown key in file", []string{"--bootstrap", "--config", file}, []string{"etcd.peeraddress", file}},
		{"missing file", []string{"--bootstrap", "--config", "/nonexistent/nico.yaml"}, []string{"/nonexistent/nico.yaml"}},
		{"unknown flag", []string{"--etcd.peer-url", "x"}, []string{"etcd.peer-url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			// Should validation ever let a case through, it must not touch the host.
			args := append([]string{"--dataDir", t.TempDir()}, tt.args...)
			code := run(args, &out)
			if code != 2 {
				t.Fatalf("exit %d, want 2; output:\n%s", code, out.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(strings.ToLower(out.String()), strings.ToLower(w)) {
					t.Errorf("output does not name %q:\n%s", w, out.String())
				}
			}
		})
	}
}
