package ctl

import (
	"path/filepath"
	"testing"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
)

// TestAgentsBadInput: restore and recover through the agents refuse bad
// input before they call anything, naming the flag, the value and what
// is accepted.
func TestAgentsBadInput(t *testing.T) {
	dir := t.TempDir()
	root := etcdtest.IssueFiles(t, dir, pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient})
	tlsFlags := []string{"--tls.caFile", root.CA, "--tls.certFile", root.Cert, "--tls.keyFile", root.Key}
	journal := filepath.Join(dir, "j.json")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no port", append([]string{"restore", "--from", "s.db", "--agents", "10.0.0.1", "--journal", journal}, tlsFlags...), []string{`--agents "10.0.0.1"`, "want host:port"}},
		{"empty entry", append([]string{"recover", "--agents", "10.0.0.1:9481,", "--journal", journal}, tlsFlags...), []string{`--agents ""`, "want host:port"}},
		{"both channels", append([]string{"recover", "--agents", "10.0.0.1:9481", "--fleet", "f.yaml", "--journal", journal}, tlsFlags...), []string{"--agents 10.0.0.1:9481 and --fleet f.yaml", "give one"}},
		{"no snapshot", append([]string{"restore", "--agents", "127.0.0.1:1"}, tlsFlags...), []string{"restore needs --from SNAPSHOT"}},
		{"no agent answers", append([]string{"recover", "--agents", "127.0.0.1:1", "--journal", journal, "--timeout", "1s"}, tlsFlags...), []string{"--agents 127.0.0.1:1", "no agent answers"}},
		{"no channel", []string{"recover"}, []string{"recover needs --agents HOST:PORT or --fleet FILE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run(t, nil, tc.args...).want(t, ExitUsage, nil, tc.want)
		})
	}
}
