package harness

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The hierarchies a guest's systemd runs on (hybrid mode): the named v1
// hierarchy and the unified one. The v1 controllers stay the host's: CPU
// and memory controls are not available inside.
var guestHierarchies = []struct{ mount, selector string }{
	{"/sys/fs/cgroup/systemd", "name=systemd"},
	{"/sys/fs/cgroup/unified", ""},
}

// makeCgroups makes one cgroup for the guest below this process's own in
// each hierarchy and returns their cgroup.procs files.
func (h *Host) makeCgroups() ([]string, error) {
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	var procs []string
	for _, hy := range guestHierarchies {
		rel, ok := own[hy.selector]
		if !ok {
			return nil, fmt.Errorf("harness: this process is in no %q cgroup hierarchy (want hybrid cgroups, /proc/self/cgroup)", hy.selector)
		}
		dir := filepath.Join(hy.mount, rel, fmt.Sprintf("nico-sd-%s-%d", h.Name, os.Getpid()))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("harness: cgroup for %s: %w", h.Name, err)
		}
		h.cgroups = append(h.cgroups, dir)
		procs = append(procs, filepath.Join(dir, "cgroup.procs"))
	}
	return procs, nil
}

// ownCgroups maps a hierarchy's selector (controllers, "name=..." or ""
// for the unified one) to this process's cgroup path in it.
func ownCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 {
			m[parts[1]] = parts[2]
		}
	}
	return m, sc.Err()
}

// removeCgroups removes the cgroup dirs systemd left below the guest's
// (deepest first; a cgroup dir is removed with rmdir, its files go with it).
func (h *Host) removeCgroups() {
	for _, root := range h.cgroups {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			// A cgroup is busy until the last of its killed processes is
			// gone, which may be just after systemd exited.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := poll(ctx, 10*time.Millisecond, func() (bool, error) {
				err := os.Remove(d)
				return err == nil || os.IsNotExist(err), nil
			})
			cancel()
			if err != nil {
				h.t.Logf("harness: cgroup %s left behind: %v", d, err)
			}
		}
	}
	h.cgroups = nil
}
