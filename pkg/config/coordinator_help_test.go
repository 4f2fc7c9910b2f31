package config

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestCoordinatorMembershipFlagsSayBootstrapDefault: every coordinator.*
// setting that became a field of the EtcdCluster's spec.policy says in its
// help that it is only that field's bootstrap default.
func TestCoordinatorMembershipFlagsSayBootstrapDefault(t *testing.T) {
	fs := pflag.NewFlagSet("nico-coordinator", pflag.ContinueOnError)
	CoordinatorFlags(fs)
	for _, field := range []string{"learnerStartTimeout", "learnerProgressTimeout", "healthTimeout", "replaceDeadMembersAfter"} {
		f := fs.Lookup("coordinator." + field)
		if f == nil {
			t.Fatalf("no --coordinator.%s flag", field)
		}
		want := "the bootstrap default of EtcdCluster spec.policy." + field + "; once the object exists, change it with nicoctl apply"
		if !strings.Contains(f.Usage, want) {
			t.Errorf("--coordinator.%s usage %q lacks %q", field, f.Usage, want)
		}
	}
}
