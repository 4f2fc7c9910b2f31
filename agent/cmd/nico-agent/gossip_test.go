package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestGossipBadInput: a seed that does not resolve and a token file that is
// missing stop the agent with exit code 2 naming the key; a gossip port in
// use stops it with exit code 1 naming gossip.port, before it starts etcd.
func TestGossipBadInput(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"seed does not resolve", []string{"--gossip.seeds", "no-such-host.invalid", "--tokenFile", token}, 2, []string{"gossip.seeds", "no-such-host.invalid", "does not resolve"}},
		{"seed without token", []string{"--gossip.seeds", "127.0.0.1:7946"}, 2, []string{"tokenFile", "set tokenFile"}},
		{"missing token file", []string{"--bootstrap", "--tokenFile", filepath.Join(dir, "none")}, 2, []string{"tokenFile", "no such file"}},
		{"port in use", []string{"--bootstrap", "--tokenFile", token, "--gossip.bind", "127.0.0.1", "--gossip.port", busy}, 1, []string{"gossip.port " + busy, "in use"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			args := append([]string{"--dataDir", t.TempDir()}, tt.args...)
			if code := run(args, &out); code != tt.code {
				t.Fatalf("exit %d, want %d; output:\n%s", code, tt.code, out.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
