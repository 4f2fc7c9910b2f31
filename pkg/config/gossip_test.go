package config

import (
	"os"
	"path/filepath"
	"testing"
)

func TestAgentGossipKeys(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		env   map[string]string
		wants []string
	}{
		{map[string]string{"NICO_GOSSIP_SEEDS": "no-such-host.invalid:7946", "NICO_TOKENFILE": token}, []string{"config: gossip.seeds:", `seed "no-such-host.invalid:7946" does not resolve`}},
		{map[string]string{"NICO_GOSSIP_SEEDS": "10.0.0.1:70000", "NICO_TOKENFILE": token}, []string{"gossip.seeds:", "not a port"}},
		{map[string]string{"NICO_GOSSIP_SEEDS": "10.0.0.1"}, []string{"tokenFile:", "set tokenFile"}},
		{map[string]string{"NICO_TOKENFILE": filepath.Join(dir, "missing")}, []string{"tokenFile:", "no such file"}},
		{map[string]string{"NICO_TOKENFILE": empty}, []string{"tokenFile:", "is empty"}},
		{map[string]string{"NICO_GOSSIP_PORT": "79460"}, []string{"gossip.port:", `"79460"`, "0 to 65535"}},
		{map[string]string{"NICO_GOSSIP_BIND": "eth0"}, []string{"gossip.bind:", `"eth0"`, "IP address"}},
		{map[string]string{"NICO_GOSSIP_ADVERTISE": "host"}, []string{"gossip.advertise:", `"host"`}},
		{map[string]string{"NICO_GOSSIP_PROFILE": "lab"}, []string{"gossip.profile:", `"lab"`, "lan, wan, fast"}},
	}
	for _, tt := range tests {
		t.Run(tt.wants[0]+tt.wants[1], func(t *testing.T) {
			_, err := loadAgent(t, input{file: validFile, env: tt.env})
			wantErr(t, err, tt.wants...)
			if keys := keyErrors(err); len(keys) != 1 {
				t.Errorf("errors on keys %q, want exactly one", keys)
			}
		})
	}
}

func TestAgentSeedsReplaceEndpoints(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := loadAgent(t, input{args: []string{"--name=cp-2", "--gossip.seeds=127.0.0.1:7946", "--tokenFile=" + token, "--gossip.profile=fast"}})
	if err != nil {
		t.Fatalf("an agent with a seed and no etcd.endpoints: %v", err)
	}
	if !a.Gossip.Enabled(a.TokenFile) || a.Gossip.PortNumber() != 7946 || a.Gossip.Profile != "fast" {
		t.Fatalf("gossip = %+v", a.Gossip)
	}
	tok, err := ReadToken(a.TokenFile)
	if err != nil || string(tok) != "s3cret" {
		t.Fatalf("token %q, %v", tok, err)
	}
}
