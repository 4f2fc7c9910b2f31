package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestVersionFlagPrintsVersionAndExitsZero: --version prints the build's
// version and exits 0 without starting anything.
func TestVersionFlagPrintsVersionAndExitsZero(t *testing.T) {
	old, oldOut := Version, versionOut
	Version = "v1.2.3-test"
	defer func() { Version, versionOut = old, oldOut }()
	for _, arg := range []string{"--version", "version"} {
		var out, errb bytes.Buffer
		versionOut = &out
		if code := run([]string{arg}, &errb); code != 0 {
			t.Fatalf("%s: exit %d, want 0; output:\n%s", arg, code, out.String())
		}
		if got := strings.TrimSpace(out.String()); got != "nico-agent v1.2.3-test" {
			t.Errorf("%s printed %q", arg, got)
		}
	}
}

// TestHelpDescribesAgentLeaveAndExitCodes: --help starts with what the agent
// is, names the leave subcommand and lists every exit code run and leave use.
func TestHelpDescribesAgentLeaveAndExitCodes(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"leave", "--help"}} {
		var out bytes.Buffer
		if code := run(args, &out); code != 0 {
			t.Fatalf("%v: exit %d, want 0", args, code)
		}
		help := out.String()
		if !strings.HasPrefix(help, "nico-agent runs nico on one machine") {
			t.Errorf("%v: help does not start with the description:\n%s", args, help)
		}
		for _, w := range []string{"nico-agent leave", "Exit codes", "  0  ", "  1  ", "  2  ", "  3  ", "  4  ", "RestartPreventExitStatus=3", "RestartForceExitStatus=4", "--etcd.endpoints"} {
			if !strings.Contains(help, w) {
				t.Errorf("%v: help does not mention %q", args, w)
			}
		}
	}
}
