// Package harness boots Debian's systemd as PID 1 of its own namespaces
// (pid, mount, uts, ipc, net, cgroup) over a throw-away overlay of the
// host's root, so that unit files run under a real systemd without a VM.
//
//	host (test)                      stage 1 (re-exec)           stage 2 (PID 1 of the new namespaces)
//	Boot: layer dir, cgroups  ──▶    join the cgroups   ──▶      tmpfs + overlay (layer over /), binds,
//	      start stage 1              exec unshare --fork         proc (sys ro), sysfs ro, cgroups, /dev,
//	      wait for D-Bus                                         /run, /tmp; pivot_root; make-rshared /;
//	Shutdown: SIGRTMIN+4, wait,                                  exec /lib/systemd/systemd --system
//	      remove the cgroups
//
// The test binary is the re-exec'd program: its TestMain must call
// RunGuestIfRequested before anything else.
package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Environment variables between the host and the two guest stages.
const (
	stageEnv = "NICO_SDHARNESS_STAGE" // "1" or "2"
	specEnv  = "NICO_SDHARNESS_SPEC"  // JSON guestSpec
)

// SystemdPath is the systemd that boots as each guest's PID 1.
const SystemdPath = "/lib/systemd/systemd"

// guestSpec is what the host tells the guest stages.
type guestSpec struct {
	Name    string   // hostname and container=
	Scratch string   // host dir the guest mounts its tmpfs on
	Layer   string   // host dir laid over / (the top lower layer)
	Binds   []Bind   // host paths bound into the guest's root
	Cgroups []string // cgroup.procs files stage 1 joins
	Target  string   // the unit systemd boots into
}

// Bind bind-mounts a host path (file or directory) onto a path of the
// guest's root, read-only when RO.
type Bind struct {
	Src, Dst string
	RO       bool
}

// RunGuestIfRequested runs a guest stage and never returns when this
// process is one; otherwise it returns at once.
func RunGuestIfRequested() {
	stage := os.Getenv(stageEnv)
	if stage == "" {
		return
	}
	var spec guestSpec
	err := json.Unmarshal([]byte(os.Getenv(specEnv)), &spec)
	if err == nil {
		switch stage {
		case "1":
			err = stage1(spec)
		case "2":
			err = stage2(spec)
		default:
			err = fmt.Errorf("%s=%q, want 1 or 2", stageEnv, stage)
		}
	}
	fmt.Fprintf(os.Stderr, "harness guest %s stage %s: %v\n", spec.Name, stage, err)
	os.Exit(111)
}

// stage1 joins the guest's cgroups (so that they become the root of its
// cgroup namespace) and execs unshare, which forks stage 2 as PID 1.
func stage1(spec guestSpec) error {
	for _, f := range spec.Cgroups {
		if err := os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			return fmt.Errorf("join cgroup: %w", err)
		}
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, stageEnv+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, stageEnv+"=2")
	args := []string{"unshare", "--pid", "--mount", "--uts", "--ipc", "--net", "--cgroup", "--fork", "--kill-child", "--propagation", "private", "--", self}
	return syscall.Exec(unshare, args, env)
}

// stage2 builds the guest's root and execs systemd in it.
func stage2(spec guestSpec) error {
	if err := unix.Sethostname([]byte(spec.Name)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	s := spec.Scratch
	if err := mount("tmpfs", s, "tmpfs", 0, "mode=0755"); err != nil {
		return err
	}
	upper, work, root := filepath.Join(s, "upper"), filepath.Join(s, "work"), filepath.Join(s, "root")
	for _, d := range []string{upper, work, root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	// The layer goes into the upper dir: as a lower dir of its own it
	// would overlap the host's root (ELOOP).
	if err := copyTree(spec.Layer, upper); err != nil {
		return fmt.Errorf("copy the layer: %w", err)
	}
	opts := fmt.Sprintf("lowerdir=/,upperdir=%s,workdir=%s", upper, work)
	if err := mount("overlay", root, "overlay", 0, opts); err != nil {
		return err
	}
	for _, b := range spec.Binds {
		if err := bindInto(root, b); err != nil {
			return err
		}
	}
	if err := mountAPI(root); err != nil {
		return err
	}
	if err := pivot(root); err != nil {
		return err
	}
	// systemd leaves propagation alone in a container; without shared
	// mounts LoadCredential= yields an empty credentials directory.
	if err := mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
		return err
	}
	env := []string{"container=" + spec.Name, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return syscall.Exec(SystemdPath, []string{SystemdPath, "--system", "--unit=" + spec.Target, "--show-status=no"}, env)
}

func mount(src, dst, fstype string, flags uintptr, data string) error {
	if err := unix.Mount(src, dst, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s (%s, %s): %w", src, dst, fstype, data, err)
	}
	return nil
}

// bindInto binds b.Src onto root/b.Dst, making the mount point.
func bindInto(root string, b Bind) error {
	fi, err := os.Stat(b.Src)
	if err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	dst := filepath.Join(root, b.Dst)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if fi.IsDir() {
		err = os.MkdirAll(dst, 0o755)
	} else if _, serr := os.Lstat(dst); serr != nil {
		err = os.WriteFile(dst, nil, 0o644)
	}
	if err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	if err := mount(b.Src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if b.RO {
		return mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
	}
	return nil
}

// mountAPI mounts /proc (/proc/sys read-only), a read-only /sys with the
// cgroup hierarchies systemd runs on in hybrid mode, a private /dev with
// its own devpts, and tmpfs on /run and /tmp.
func mountAPI(root string) error {
	p := func(rel string) string { return filepath.Join(root, rel) }
	const nosuid = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	steps := []func() error{
		func() error { return mount("proc", p("proc"), "proc", nosuid, "") },
		func() error { return mount(p("proc/sys"), p("proc/sys"), "", unix.MS_BIND, "") },
		func() error {
			return mount("", p("proc/sys"), "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|nosuid, "")
		},
		func() error { return mount("sysfs", p("sys"), "sysfs", nosuid|unix.MS_RDONLY, "") },
		func() error { return mount("tmpfs", p("sys/fs/cgroup"), "tmpfs", nosuid, "mode=0755") },
		func() error { return os.Mkdir(p("sys/fs/cgroup/unified"), 0o755) },
		func() error { return mount("cgroup2", p("sys/fs/cgroup/unified"), "cgroup2", nosuid, "") },
		func() error { return os.Mkdir(p("sys/fs/cgroup/systemd"), 0o755) },
		func() error {
			return mount("cgroup", p("sys/fs/cgroup/systemd"), "cgroup", nosuid, "none,name=systemd")
		},
		func() error { return mountDev(p("dev")) },
		func() error { return mount("tmpfs", p("run"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755") },
		func() error { return mount("tmpfs", p("tmp"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777") },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// mountDev makes a private /dev: the host's harmless character devices
// bound in, a devpts instance of its own, shm, and the usual links.
func mountDev(dev string) error {
	if err := mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID, "mode=0755"); err != nil {
		return err
	}
	for _, n := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		if err := bindInto(dev, Bind{Src: "/dev/" + n, Dst: n}); err != nil {
			return err
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(filepath.Join(dev, d), 0o755); err != nil {
			return err
		}
	}
	if err := mount("devpts", filepath.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5"); err != nil {
		return err
	}
	if err := mount("tmpfs", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return err
	}
	links := map[string]string{"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	return nil
}

// pivot makes root the root of this mount namespace and drops the old one.
func pivot(root string) error {
	old := filepath.Join(root, ".oldroot")
	if err := os.Mkdir(old, 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(root, old); err != nil {
		return fmt.Errorf("pivot_root %s: %w", root, err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Unmount("/.oldroot", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount the old root: %w", err)
	}
	return os.Remove("/.oldroot")
}

// copyTree copies the directories, regular files and symbolic links
// below src into dst, keeping their modes.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if rel == "." {
				return nil
			}
			return os.Mkdir(to, fi.Mode().Perm())
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil {
				return err
			}
			return os.Chmod(to, fi.Mode().Perm())
		}
	})
}

// quote is for log lines naming a command.
func quote(args []string) string { return strings.Join(args, " ") }
