package ctl

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestCompletionScripts: `nicoctl completion bash|zsh|fish` prints a script
// (bash's passes `bash -n`), and the completions it asks nicoctl for name
// every command and every kind `get` accepts.
func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		r := run(t, nil, "completion", shell)
		r.want(t, 0, []string{"nicoctl"}, nil)
		if shell != "bash" {
			continue
		}
		bash, err := exec.LookPath("bash")
		if err != nil {
			t.Skip("no bash on this machine")
		}
		cmd := exec.Command(bash, "-n")
		cmd.Stdin = strings.NewReader(r.stdout)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("bash -n: %v\n%s", err, out)
		}
	}
	var out, errb bytes.Buffer
	root := (&app{}).rootCmd()
	if code := Main([]string{"__complete", ""}, &out, &errb); code != 0 {
		t.Fatalf("__complete: exit %d: %s", code, errb.String())
	}
	for _, c := range root.Commands() {
		if !strings.Contains(out.String(), c.Name()+"\t") {
			t.Errorf("command completions lack %q:\n%s", c.Name(), out.String())
		}
	}
	out.Reset()
	if code := Main([]string{"__complete", "get", ""}, &out, &errb); code != 0 {
		t.Fatalf("__complete get: exit %d: %s", code, errb.String())
	}
	for _, kind := range []string{"members", "nodes", "ops", "etcdcluster"} {
		if !strings.Contains(out.String(), kind+"\t") {
			t.Errorf("get completions lack %q:\n%s", kind, out.String())
		}
	}
}
