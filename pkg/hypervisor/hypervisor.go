// Package hypervisor is what a hypervisor host's agent needs from the
// machine's virtualization: the Hypervisor interface, the description of a
// nico domain, and first-boot identity. The real implementation over
// libvirt is in pkg/libvirt (cgo); a memory fake that passes the same
// contract test is in hypervisortest.
//
// Only nico's own domains are ever touched: an implementation lists,
// changes and removes a domain only when it carries nico's metadata.
// Domains are keyed by UUID, so that a retried define never creates a
// second domain.
package hypervisor

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors.
var (
	// ErrNotFound: no nico domain has that UUID.
	ErrNotFound = errors.New("hypervisor: no such domain")
	// ErrNameTaken: another domain (nico's or foreign) already has the name.
	ErrNameTaken = errors.New("hypervisor: domain name taken")
	// ErrNoNetwork, ErrNoStoragePool, ErrNoImage: the spec names something
	// the host does not have.
	ErrNoNetwork     = errors.New("hypervisor: no such network")
	ErrNoStoragePool = errors.New("hypervisor: no such storage pool")
	ErrNoImage       = errors.New("hypervisor: no such base image")
	// ErrUnsupported: the hypervisor cannot do this (libvirt's test driver
	// cannot grow a volume).
	ErrUnsupported = errors.New("hypervisor: not supported")
	// ErrUnavailable: the connection to the hypervisor is down; retry.
	ErrUnavailable = errors.New("hypervisor: unavailable")
)

// Hypervisor manages nico's domains on one host.
type Hypervisor interface {
	// Host reports the host's capacity and what it offers.
	Host(ctx context.Context) (Host, error)
	// Domains lists nico's domains (foreign ones are never listed).
	Domains(ctx context.Context) ([]Domain, error)
	// Define creates the domain's overlay volume when missing (growing it
	// when the spec asks for more), and defines or redefines the domain
	// keyed by spec.UUID. A running domain keeps running with its old
	// definition until it is restarted.
	Define(ctx context.Context, spec DomainSpec) error
	// Start boots a defined domain; starting a running one is a no-op.
	Start(ctx context.Context, uuid string) error
	// Stop asks the guest to shut down and destroys the domain when it has
	// not stopped within grace; stopping a stopped one is a no-op.
	Stop(ctx context.Context, uuid string, grace time.Duration) error
	// Undefine stops the domain at once and removes it with the volumes
	// nico created for it.
	Undefine(ctx context.Context, uuid string) error
	// ConsoleBytes tells how many bytes the domain wrote to its serial
	// console since it last started (0 when it is not running): a guest
	// that wrote nothing has not got as far as its kernel. ErrNotFound for a
	// UUID that is not nico's; ErrUnsupported where the implementation
	// cannot read the console (a remote host, a session daemon, a domain
	// defined without a console log).
	ConsoleBytes(ctx context.Context, uuid string) (int64, error)
}

// Domain types a host may offer (DomainSpec.Type, Host.DomainTypes).
const (
	// TypeKVM runs the guest with hardware virtualization (/dev/kvm).
	TypeKVM = "kvm"
	// TypeQEMU runs the guest under software emulation (QEMU's TCG): slow,
	// but it needs nothing of the host's CPU.
	TypeQEMU = "qemu"
)

// Host is a hypervisor host's capacity.
type Host struct {
	VCPUs     int
	MemoryMiB int
	// DiskGiB is each storage pool's room for nico's volumes by name: its
	// capacity less the volumes that are not nico's.
	DiskGiB map[string]int
	// Networks are the active networks; Images the base volumes as
	// "pool/volume" (volumes nico created are not images).
	Networks []string
	Images   []string
	// DomainTypes are the domain types the host can run, e.g. kvm and
	// qemu (libvirt offers kvm only where qemu can use /dev/kvm).
	DomainTypes []string
}

// State is a domain's run state.
type State string

// Domain states.
const (
	Running  State = "running"
	Shutoff  State = "shutoff"
	Paused   State = "paused"
	Shutdown State = "shutdown" // shutting down
	Crashed  State = "crashed"
	Other    State = "other"
)

// Domain is one of nico's domains as observed.
type Domain struct {
	// Spec holds the fields nico owns as read back from the domain's
	// definition (Identity is not read back).
	Spec      DomainSpec
	State     State
	Addresses []string
}

// DomainSpec is what nico owns of a domain.
type DomainSpec struct {
	UUID string
	// Type is the domain type (TypeKVM, TypeQEMU, or what else the host
	// offers); empty: the implementation's default. It applies when the
	// domain is (re)defined and is not one of the fields Differs compares:
	// a running domain keeps its type until it is redefined.
	Type string
	// Name is the machine's (and the domain's) name; Pool its machine pool.
	Name        string
	Pool        string
	VCPUs       int
	MemoryMiB   int
	DiskGiB     int
	StoragePool string
	BaseImage   string
	Network     string
	MAC         string
	// Kernel, when set, boots the domain directly from a kernel (and
	// Initrd, with Cmdline) on the host rather than from its disk.
	Kernel   string
	Initrd   string
	Cmdline  string
	Identity Identity
}

// Differs tells which owned fields of the observed spec differ from s, as
// a list of field names (empty: nothing nico owns changed). The disk only
// differs when it must grow.
func (s DomainSpec) Differs(observed DomainSpec) []string {
	var d []string
	if s.VCPUs != observed.VCPUs {
		d = append(d, "vcpus")
	}
	if s.MemoryMiB != observed.MemoryMiB {
		d = append(d, "memory")
	}
	if s.DiskGiB > observed.DiskGiB {
		d = append(d, "disk")
	}
	if s.Network != observed.Network {
		d = append(d, "network")
	}
	if s.MAC != observed.MAC {
		d = append(d, "mac")
	}
	if s.Kernel != observed.Kernel || s.Initrd != observed.Initrd || s.Cmdline != observed.Cmdline {
		d = append(d, "boot")
	}
	return d
}

// VolumeName is the name of the overlay volume nico creates for a domain.
func VolumeName(uuid string) string { return "nico-" + uuid + ".qcow2" }

// MAC returns a locally administered MAC address derived from the machine's
// name (QEMU's 52:54:00 prefix), stable across re-creations of the machine.
func MAC(machine string) string {
	h := sha256.Sum256([]byte(machine))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", h[0], h[1], h[2])
}
