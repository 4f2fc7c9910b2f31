package config

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestAgentHelpEndpoints: nico-agent --help must not call etcd.endpoints
// required when the rule accepts gossip.seeds instead (the rule itself:
// TestAgentSeedsReplaceEndpoints).
func TestAgentHelpEndpoints(t *testing.T) {
	fs := pflag.NewFlagSet("nico-agent", pflag.ContinueOnError)
	AgentFlags(fs)
	f := fs.Lookup("etcd.endpoints")
	if f == nil {
		t.Fatal("no --etcd.endpoints flag")
	}
	if strings.Contains(f.Usage, "required unless bootstrap") {
		t.Errorf("usage %q says required unless bootstrap, but gossip.seeds suffice", f.Usage)
	}
	for _, want := range []string{"gossip.seeds", "bootstrap"} {
		if !strings.Contains(f.Usage, want) {
			t.Errorf("usage %q does not mention %s", f.Usage, want)
		}
	}
}
