package etcdtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Binary is one etcd server binary that tests can run as a child process.
type Binary struct {
	Version string // as `etcd --version` reports it, like "3.6.16"
	Path    string // absolute path to the etcd binary
}

// Env variables read by Binaries.
const (
	// EnvBinaries lists etcd binaries, colon separated.
	EnvBinaries = "NICO_ETCD_BINARIES"
	// EnvRequireBinaries set to 1 turns a missing binary into a test failure.
	EnvRequireBinaries = "NICO_REQUIRE_ETCD_BINARIES"
)

// Binaries returns the etcd binaries named in NICO_ETCD_BINARIES or, when it
// is empty, those found at .cache/etcd/*/etcd under the repository root,
// ordered by version. When there are none it skips the test, or fails it when
// NICO_REQUIRE_ETCD_BINARIES=1.
func Binaries(t testing.TB) []Binary {
	t.Helper()
	var paths []string
	if env := os.Getenv(EnvBinaries); env != "" {
		for _, p := range strings.Split(env, ":") {
			if p != "" {
				paths = append(paths, p)
			}
		}
	} else if root, ok := repoRoot(); ok {
		found, _ := filepath.Glob(filepath.Join(root, ".cache", "etcd", "*", "etcd"))
		paths = found
	}
	var bins []Binary
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatalf("etcdtest: binary %q: %v", p, err)
		}
		out, err := exec.Command(abs, "--version").Output()
		if err != nil {
			t.Fatalf("etcdtest: %s --version: %v (from %s or .cache/etcd)", abs, err, EnvBinaries)
		}
		v := versionOf(string(out))
		if v == "" {
			t.Fatalf("etcdtest: %s --version printed no \"etcd Version:\" line: %q", abs, out)
		}
		bins = append(bins, Binary{Version: v, Path: abs})
	}
	if len(bins) == 0 {
		msg := "etcdtest: no etcd binaries: set " + EnvBinaries + "=/path/to/etcd:... or build them with " +
			"tests/etcdbin/build.sh v3.6.16 .cache/etcd/v3.6.16 && tests/etcdbin/build.sh v3.7.3 .cache/etcd/v3.7.3"
		if os.Getenv(EnvRequireBinaries) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	sort.Slice(bins, func(i, j int) bool { return versionLess(bins[i].Version, bins[j].Version) })
	return bins
}

func versionOf(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "etcd Version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// versionLess compares dotted versions number by number ("3.6.16" < "3.10.0").
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, errx := strconv.Atoi(as[i])
		y, erry := strconv.Atoi(bs[i])
		if errx != nil || erry != nil {
			if as[i] != bs[i] {
				return as[i] < bs[i]
			}
			continue
		}
		if x != y {
			return x < y
		}
	}
	return len(as) < len(bs)
}

// repoRoot is the nearest directory above the working directory (a test's
// package directory) that holds go.mod.
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
