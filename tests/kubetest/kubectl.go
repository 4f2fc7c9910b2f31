package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Kubectl runs the built kubectl (by path: a /usr/bin/kubectl of another
// version may exist) with one kubeconfig and nothing from $HOME.
type Kubectl struct {
	Bin        string
	Kubeconfig string
}

// Run runs kubectl with args and stdin (nil: none) and returns its standard
// output; a failure's error holds its standard error.
func (k Kubectl) Run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	all := append([]string{"--kubeconfig=" + k.Kubeconfig, "--cache-dir=" + filepath.Join(filepath.Dir(k.Kubeconfig), ".kubectl-cache"), "--request-timeout=20s"}, args...)
	cmd := exec.CommandContext(ctx, k.Bin, all...)
	cmd.Env = kubectlEnv()
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

// kubectlEnv is the environment without KUBECONFIG and with a HOME of its
// own, so that nothing of the user's ~/.kube is read.
func kubectlEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+os.TempDir())
}
