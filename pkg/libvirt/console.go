//go:build cgo

package libvirt

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	"github.com/homystack/nico/pkg/hypervisor"
)

// consoleDirFor is where the console logs of uri's domains go when the
// agent can read them: on this host, written by the system daemon's
// virtlogd. A remote host's or a session daemon's logs are not kept.
func consoleDirFor(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.Host != "" {
		return ""
	}
	if (u.Scheme == "qemu" || u.Scheme == "qemu+unix") && u.Path == "/system" {
		return "/var/log/libvirt/qemu"
	}
	return ""
}

// consoleLog is the file domain uuid's console is logged to; "" without
// ConsoleDir.
func (h *Hypervisor) consoleLog(uuid string) string {
	if h.ConsoleDir == "" {
		return ""
	}
	return filepath.Join(h.ConsoleDir, "nico-"+uuid+"-console.log")
}

// ConsoleBytes implements hypervisor.Hypervisor: the size of the domain's
// console log, which libvirt empties at each start.
func (h *Hypervisor) ConsoleBytes(ctx context.Context, uuid string) (int64, error) {
	c, err := h.connect()
	if err != nil {
		return 0, err
	}
	d, p, err := h.lookup(c, uuid)
	if err != nil {
		return 0, err
	}
	defer d.Free()
	active, err := d.IsActive()
	if err != nil {
		return 0, h.check(err, "state of %s", uuid)
	}
	switch {
	case !active:
		return 0, nil
	case p.consoleLog == "" && isTestDriver(c):
		return 0, nil // the test driver runs no guest: nothing is ever written
	case p.consoleLog == "" || h.ConsoleDir == "":
		return 0, fmt.Errorf("%w: domain %s keeps no console log this agent can read (it gets one when it is next defined, on a local qemu:///system)", hypervisor.ErrUnsupported, uuid)
	}
	fi, err := os.Stat(p.consoleLog)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil // nothing written yet
	case err != nil:
		return 0, fmt.Errorf("%w: console log of %s: %v", hypervisor.ErrUnsupported, uuid, err)
	}
	return fi.Size(), nil
}

// removeConsoleLog removes the console log of an undefined domain, when it
// is the one this connection keeps for it.
func (h *Hypervisor) removeConsoleLog(uuid, path string) {
	if path == "" || path != h.consoleLog(uuid) {
		return
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		h.log.Warn("console log not removed", "uuid", uuid, "path", path, "err", err)
	}
}
