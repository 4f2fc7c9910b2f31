//go:build cgo

package libvirt

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/homystack/nico/pkg/hypervisor"
	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"
)

// Hypervisor manages nico's domains through one libvirt connection URI
// (qemu:///system on a host, test:///default or test:///FILE in tests).
type Hypervisor struct {
	uri string
	log *slog.Logger
	// DomainType is the domain type of a spec that names none: "kvm",
	// "qemu" or "test". Empty: "test" on the test driver, "kvm" where the
	// host offers it, else "qemu" (software emulation).
	DomainType string
	// ConsoleDir is where each domain's serial console is logged (by
	// libvirt's virtlogd) and read back by ConsoleBytes. New sets it to
	// /var/log/libvirt/qemu for a local qemu:///system; empty: no console
	// log (ConsoleBytes is ErrUnsupported, except on the test driver, whose
	// domains run no guest and so write nothing).
	ConsoleDir string

	mu   sync.Mutex
	conn *libvirt.Connect
	typ  string
}

// New returns a Hypervisor for uri. It connects on first use.
func New(uri string, log *slog.Logger) *Hypervisor {
	return &Hypervisor{uri: uri, log: log.With("component", "libvirt", "uri", uri), ConsoleDir: consoleDirFor(uri)}
}

// defaultType is the domain type of a spec that names none.
func (h *Hypervisor) defaultType() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.typ
}

// Close drops the connection.
func (h *Hypervisor) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == nil {
		return nil
	}
	_, err := h.conn.Close()
	h.conn = nil
	return err
}

// connect returns the open connection, opening it when needed.
func (h *Hypervisor) connect() (*libvirt.Connect, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn != nil {
		if alive, err := h.conn.IsAlive(); err == nil && alive {
			return h.conn, nil
		}
		_, _ = h.conn.Close()
		h.conn = nil
	}
	c, err := libvirt.NewConnect(h.uri)
	if err != nil {
		return nil, fmt.Errorf("%w: connect %s: %v", hypervisor.ErrUnavailable, h.uri, err)
	}
	h.conn = c
	if h.typ == "" {
		h.typ = h.DomainType
		if h.typ == "" {
			h.typ = detectType(c)
		}
		h.log.Info("connected", "domainType", h.typ)
	}
	return c, nil
}

func detectType(c *libvirt.Connect) string {
	if isTestDriver(c) {
		return "test"
	}
	if types, err := domainTypes(c); err == nil && slices.Contains(types, hypervisor.TypeKVM) {
		return hypervisor.TypeKVM
	}
	return hypervisor.TypeQEMU
}

func isTestDriver(c *libvirt.Connect) bool {
	t, err := c.GetType()
	return err == nil && strings.EqualFold(t, "test")
}

// domainTypes are the domain types libvirt's capabilities offer for
// hardware-virtualized guests (kvm only where qemu can use /dev/kvm).
func domainTypes(c *libvirt.Connect) ([]string, error) {
	doc, err := c.GetCapabilities()
	if err != nil {
		return nil, err
	}
	var caps libvirtxml.Caps
	if err := caps.Unmarshal(doc); err != nil {
		return nil, fmt.Errorf("libvirt: parse capabilities: %w", err)
	}
	var out []string
	for _, g := range caps.Guests {
		if g.OSType != "hvm" {
			continue
		}
		for _, d := range g.Arch.Domains {
			if !slices.Contains(out, d.Type) {
				out = append(out, d.Type)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// check classifies err: a broken connection is dropped and reported as
// hypervisor.ErrUnavailable; other errors are wrapped with what failed.
func (h *Hypervisor) check(err error, what string, args ...any) error {
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf(what, args...)
	var lerr libvirt.Error
	if errors.As(err, &lerr) {
		switch lerr.Code {
		case libvirt.ERR_NO_CONNECT, libvirt.ERR_INVALID_CONN, libvirt.ERR_SYSTEM_ERROR, libvirt.ERR_RPC:
			h.mu.Lock()
			if h.conn != nil {
				_, _ = h.conn.Close()
				h.conn = nil
			}
			h.mu.Unlock()
			return fmt.Errorf("%w: %s: %s", hypervisor.ErrUnavailable, msg, lerr.Message)
		}
		return fmt.Errorf("libvirt: %s: %s", msg, lerr.Message)
	}
	return fmt.Errorf("libvirt: %s: %w", msg, err)
}

// isCode tells whether err is a libvirt error with code c.
func isCode(err error, c libvirt.ErrorNumber) bool {
	var lerr libvirt.Error
	return errors.As(err, &lerr) && lerr.Code == c
}

var _ hypervisor.Hypervisor = (*Hypervisor)(nil)
