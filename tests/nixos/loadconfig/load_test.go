package loadconfig

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/config"
	"github.com/spf13/pflag"
)

// rendered is one node's files, as tests/nixos/eval/vm-tests.nix exports
// them (JSON, which is YAML).
type rendered struct {
	Agent       string            `json:"agent"`
	Coordinator *string           `json:"coordinator"`
	NicoctlEnv  map[string]string `json:"nicoctlEnv"`
}

func TestModuleConfigsLoad(t *testing.T) {
	path := os.Getenv("NICO_NIX_CONFIGS")
	if path == "" {
		t.Skip("NICO_NIX_CONFIGS is not set: make nix-check renders the module's files and runs this test when nixpkgs' lib is found")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]rendered
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(all) == 0 {
		t.Fatalf("%s holds no configuration", path)
	}
	// The nodes' token file exists only in the VMs; the loader checks that
	// tokenFile is readable, so a flag points it at a file here.
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("test-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		r := all[name]
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			dir := t.TempDir()
			agentFile := filepath.Join(dir, "nico-agent.yaml")
			if err := os.WriteFile(agentFile, []byte(r.Agent), 0o600); err != nil {
				t.Fatal(err)
			}
			fs := pflag.NewFlagSet("nico-agent", pflag.ContinueOnError)
			config.AgentFlags(fs)
			args := []string{"--config", agentFile}
			if strings.Contains(r.Agent, `"tokenFile"`) {
				args = append(args, "--tokenFile", token)
			}
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			a, err := config.LoadAgent(fs)
			if err != nil {
				t.Fatalf("nico-agent refuses the module's configuration: %v\n%s", err, r.Agent)
			}
			want := name[strings.Index(name, "/")+1:]
			if i := strings.Index(want, "/"); i >= 0 {
				want = want[:i] // a specialisation runs on its node
			}
			if a.Name != want {
				t.Errorf("name = %q, want the node's host name %q", a.Name, want)
			}
			if strings.HasPrefix(name, "defaults/") {
				checkDefaults(t, a, token, dir)
			}
			checkNicoctlEnv(t, r.NicoctlEnv)
			if r.Coordinator == nil {
				return
			}
			coordFile := filepath.Join(dir, "nico-coordinator.yaml")
			if err := os.WriteFile(coordFile, []byte(*r.Coordinator), 0o600); err != nil {
				t.Fatal(err)
			}
			cfs := pflag.NewFlagSet("nico-coordinator", pflag.ContinueOnError)
			config.CoordinatorFlags(cfs)
			cargs := []string{"--config", coordFile}
			if strings.Contains(*r.Coordinator, `"tokenFile"`) {
				cargs = append(cargs, "--tokenFile", token)
			}
			if err := cfs.Parse(cargs); err != nil {
				t.Fatal(err)
			}
			if _, err := config.LoadCoordinator(cfs); err != nil {
				t.Fatalf("nico-coordinator refuses the module's configuration: %v\n%s", err, *r.Coordinator)
			}
		})
	}
}

// checkDefaults compares the configuration the module renders for a host
// that sets only what it must (every typed option at its default) with the
// agent's own defaults for the same host: a default that differs between
// the module and pkg/config fails here. Nil and empty lists compare equal.
func checkDefaults(t *testing.T, fromModule config.Agent, token, dir string) {
	t.Helper()
	minimal := filepath.Join(dir, "minimal.yaml")
	doc := fmt.Sprintf("name: %s\nroles: %s\ngossip:\n  seeds: %s\n", fromModule.Name, yamlList(fromModule.Roles), yamlList(fromModule.Gossip.Seeds))
	if err := os.WriteFile(minimal, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("nico-agent", pflag.ContinueOnError)
	config.AgentFlags(fs)
	if err := fs.Parse([]string{"--config", minimal, "--tokenFile", token}); err != nil {
		t.Fatal(err)
	}
	own, err := config.LoadAgent(fs)
	if err != nil {
		t.Fatalf("minimal configuration: %v\n%s", err, doc)
	}
	got, want := fmt.Sprintf("%+v", fromModule), fmt.Sprintf("%+v", own)
	if got != want {
		t.Errorf("the module's defaults differ from the agent's:\nmodule: %s\nagent:  %s", got, want)
	}
}

func yamlList(v []string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// checkNicoctlEnv loads nicoctl's configuration with the NICO_* variables
// the module sets for shells on the host: each must name a key of nicoctl
// and hold a value it accepts, and the endpoint must be what was set.
func checkNicoctlEnv(t *testing.T, env map[string]string) {
	t.Helper()
	if len(env) == 0 {
		return
	}
	for k, v := range env {
		if strings.HasPrefix(k, "NICO_") {
			t.Setenv(k, v)
		}
	}
	fs := pflag.NewFlagSet("nicoctl", pflag.ContinueOnError)
	config.CtlFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	c, err := config.LoadCtl(fs)
	if err != nil {
		t.Fatalf("nicoctl refuses the module's environment %v: %v", env, err)
	}
	got := map[string]string{
		"NICO_ENDPOINTS":       strings.Join(c.Endpoints, ","),
		"NICO_TLS_CAFILE":      c.TLS.CAFile,
		"NICO_TLS_CERTFILE":    c.TLS.CertFile,
		"NICO_TLS_KEYFILE":     c.TLS.KeyFile,
		"NICO_SECRETS_KEYFILE": c.Secrets.KeyFile,
	}
	for k, v := range env {
		if !strings.HasPrefix(k, "NICO_") {
			continue // etcdctl's
		}
		g, known := got[k]
		if !known {
			t.Errorf("the module sets %s, which this test does not know; add it here", k)
		} else if g != v {
			t.Errorf("%s=%s: nicoctl took %q", k, v, g)
		}
	}
}
