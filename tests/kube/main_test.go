package kube

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/homystack/nico/pkg/etcdtest/leakcheck"
	"go.uber.org/goleak"
)

// TestMain removes the nicoctl binary the tests built, and fails the
// package when a test left a goroutine behind.
func TestMain(m *testing.M) {
	code := m.Run()
	if nicoctlBuild.path != "" {
		os.RemoveAll(filepath.Dir(nicoctlBuild.path))
	}
	if code == 0 {
		if err := goleak.Find(leakcheck.EtcdIgnores()...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
