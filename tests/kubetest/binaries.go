package kubetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Version is the Kubernetes release the tests run (make kube-binaries
// builds it into .cache/kube/<Version>).
const Version = "v1.37.2"

// Env variables read by FindBinaries.
const (
	// EnvBinaries is the directory holding the five binaries.
	EnvBinaries = "NICO_KUBE_BINARIES"
	// EnvRequireBinaries set to 1 turns missing binaries into a test failure.
	EnvRequireBinaries = "NICO_REQUIRE_KUBE_BINARIES"
)

// Binaries are the paths of the built Kubernetes commands.
type Binaries struct {
	Dir               string
	APIServer         string
	ControllerManager string
	Scheduler         string
	Kubectl           string
	Kubelet           string
}

// BinariesIn returns the binaries of dir, checking that each exists and that
// kube-apiserver reports Version.
func BinariesIn(dir string) (Binaries, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Binaries{}, fmt.Errorf("kubetest: binaries dir %q: %w", dir, err)
	}
	b := Binaries{
		Dir:               abs,
		APIServer:         filepath.Join(abs, "kube-apiserver"),
		ControllerManager: filepath.Join(abs, "kube-controller-manager"),
		Scheduler:         filepath.Join(abs, "kube-scheduler"),
		Kubectl:           filepath.Join(abs, "kubectl"),
		Kubelet:           filepath.Join(abs, "kubelet"),
	}
	for _, p := range []string{b.APIServer, b.ControllerManager, b.Scheduler, b.Kubectl, b.Kubelet} {
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return Binaries{}, fmt.Errorf("kubetest: binary %s missing (make kube-binaries builds it)", p)
		}
	}
	out, err := exec.Command(b.APIServer, "--version").Output()
	if err != nil {
		return Binaries{}, fmt.Errorf("kubetest: %s --version: %w", b.APIServer, err)
	}
	if got := strings.TrimSpace(string(out)); got != "Kubernetes "+Version {
		return Binaries{}, fmt.Errorf("kubetest: %s reports %q, want \"Kubernetes %s\"", b.APIServer, got, Version)
	}
	return b, nil
}

// FindBinaries returns the binaries of NICO_KUBE_BINARIES or, when it is
// empty, of .cache/kube/<Version> under the repository root. When they are
// missing it skips the test, or fails it when NICO_REQUIRE_KUBE_BINARIES=1.
func FindBinaries(t testing.TB) Binaries {
	t.Helper()
	dir := os.Getenv(EnvBinaries)
	if dir == "" {
		root, ok := repoRoot()
		if !ok {
			t.Fatal("kubetest: no go.mod above the working directory")
		}
		dir = filepath.Join(root, ".cache", "kube", Version)
	}
	b, err := BinariesIn(dir)
	if err != nil {
		msg := fmt.Sprintf("%v; set %s=DIR or run make kube-binaries", err, EnvBinaries)
		if os.Getenv(EnvRequireBinaries) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return b
}

// repoRoot is the nearest directory above the working directory that holds
// go.mod.
func repoRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}
