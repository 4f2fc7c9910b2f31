package harness

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Target is the unit every guest boots into: basic.target and nothing
// of the host's multi-user.target.
const Target = "nico-test.target"

const targetUnit = `[Unit]
Description=nico test tier: basic.target only
Requires=basic.target
After=basic.target
AllowIsolate=yes
`

// File is a file the layer puts in the guest's root.
type File struct {
	Data []byte
	Mode os.FileMode // 0: 0644
	// Link, when set, makes a symbolic link to Link instead.
	Link string
}

// alwaysMasked are units of the host's systemd that must not run in a
// guest (devices, clocks, the host's own services), on top of every unit
// the host enabled (hostEnabled).
var alwaysMasked = []string{
	"systemd-udevd.service", "systemd-udevd-control.socket", "systemd-udevd-kernel.socket",
	"systemd-udev-trigger.service", "systemd-udev-settle.service",
	"systemd-timesyncd.service", "systemd-networkd.service", "systemd-resolved.service",
	"systemd-firstboot.service", "systemd-repart.service", "systemd-binfmt.service",
	"systemd-modules-load.service", "systemd-pstore.service", "systemd-machine-id-commit.service",
	"systemd-random-seed.service", "systemd-hwdb-update.service", "systemd-journal-catalog-update.service",
	"proc-sys-fs-binfmt_misc.automount", "dev-hugepages.mount", "sys-kernel-debug.mount",
	"sys-kernel-tracing.mount", "sys-kernel-config.mount", "sys-fs-fuse-connections.mount",
	"getty.target", "console-getty.service", "getty@tty1.service",
	"nix-daemon.service", "nix-daemon.socket", "postgresql.service", "cron.service", "ssh.service", "ssh.socket",
	"apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer", "e2scrub_all.timer",
	"e2scrub_reap.service", "fstrim.timer", "man-db.timer", "logrotate.timer",
}

// hostEnabled lists the units the host's /etc/systemd/system/*.wants
// links name, but D-Bus, which the guests need.
func hostEnabled() []string {
	var units []string
	dirs, _ := filepath.Glob("/etc/systemd/system/*.wants")
	for _, d := range dirs {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), "dbus") {
				units = append(units, e.Name())
			}
		}
	}
	return units
}

// writeLayer fills dir with the files laid over the host's root: a fresh
// machine-id, the boot target, masks, users, and files.
func writeLayer(dir, name string, users []User, files map[string]File) error {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	all := map[string]File{
		"/etc/machine-id":                    {Data: []byte(hex.EncodeToString(id) + "\n"), Mode: 0o444},
		"/etc/hostname":                      {Data: []byte(name + "\n")},
		"/etc/systemd/system/" + Target:      {Data: []byte(targetUnit)},
		"/etc/systemd/system/default.target": {Link: Target},
	}
	for _, u := range append(alwaysMasked, hostEnabled()...) {
		all["/etc/systemd/system/"+u] = File{Link: "/dev/null"}
	}
	if len(users) > 0 {
		passwd, group, err := withUsers(users)
		if err != nil {
			return err
		}
		all["/etc/passwd"] = File{Data: passwd}
		all["/etc/group"] = File{Data: group}
	}
	for p, f := range files {
		all[p] = f
	}
	paths := make([]string, 0, len(all))
	for p := range all {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("harness: layer file %q: want an absolute path", p)
		}
		f := all[p]
		dst := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		_ = os.Remove(dst)
		if f.Link != "" {
			if err := os.Symlink(f.Link, dst); err != nil {
				return err
			}
			continue
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		if err := os.WriteFile(dst, f.Data, mode); err != nil {
			return err
		}
		if err := os.Chmod(dst, mode); err != nil {
			return err
		}
	}
	return nil
}

// User is a system user (and its group of the same name) the guest has on
// top of the host's, as NixOS modules declare them (users.users.etcd).
type User struct {
	Name string
	UID  int
	Home string
}

// withUsers returns the host's /etc/passwd and /etc/group with users added.
func withUsers(users []User) (passwd, group []byte, err error) {
	if passwd, err = os.ReadFile("/etc/passwd"); err != nil {
		return nil, nil, err
	}
	if group, err = os.ReadFile("/etc/group"); err != nil {
		return nil, nil, err
	}
	for _, u := range users {
		passwd = fmt.Appendf(passwd, "%s:x:%d:%d::%s:/usr/sbin/nologin\n", u.Name, u.UID, u.UID, u.Home)
		group = fmt.Appendf(group, "%s:x:%d:\n", u.Name, u.UID)
	}
	return passwd, group, nil
}
