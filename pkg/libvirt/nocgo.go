//go:build !cgo

package libvirt

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/homystack/nico/pkg/hypervisor"
)

// errNoCgo is what every call answers in a build without cgo.
var errNoCgo = fmt.Errorf("%w: this nico-agent was built without cgo, so without libvirt; a hypervisor host needs one built with CGO_ENABLED=1 and libvirt (libvirt-dev; with Nix, the nico-hypervisor package, which services.nico uses on hosts with the hypervisor role)", hypervisor.ErrUnavailable)

// Hypervisor, in a build without cgo (a static nico-agent for guests, and
// the Nix package nico that every host without the hypervisor role runs), has
// no libvirt: every call fails with hypervisor.ErrUnavailable.
type Hypervisor struct {
	// DomainType and ConsoleDir are kept for the same API as the cgo build.
	DomainType string
	ConsoleDir string
}

// New returns a Hypervisor that cannot reach libvirt.
func New(uri string, log *slog.Logger) *Hypervisor {
	log.Warn("built without cgo: the hypervisor role cannot reach libvirt", "uri", uri)
	return &Hypervisor{}
}

// Close does nothing.
func (h *Hypervisor) Close() error { return nil }

// Host implements hypervisor.Hypervisor.
func (h *Hypervisor) Host(context.Context) (hypervisor.Host, error) {
	return hypervisor.Host{}, errNoCgo
}

// Domains implements hypervisor.Hypervisor.
func (h *Hypervisor) Domains(context.Context) ([]hypervisor.Domain, error) { return nil, errNoCgo }

// Define implements hypervisor.Hypervisor.
func (h *Hypervisor) Define(context.Context, hypervisor.DomainSpec) error { return errNoCgo }

// Start implements hypervisor.Hypervisor.
func (h *Hypervisor) Start(context.Context, string) error { return errNoCgo }

// Stop implements hypervisor.Hypervisor.
func (h *Hypervisor) Stop(context.Context, string, time.Duration) error { return errNoCgo }

// Undefine implements hypervisor.Hypervisor.
func (h *Hypervisor) Undefine(context.Context, string) error { return errNoCgo }

// ConsoleBytes implements hypervisor.Hypervisor.
func (h *Hypervisor) ConsoleBytes(context.Context, string) (int64, error) { return 0, errNoCgo }

var _ hypervisor.Hypervisor = (*Hypervisor)(nil)
