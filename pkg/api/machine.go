package api

import "time"

// Kinds of the provisioning objects.
const (
	KindMachine     = "Machine"
	KindMachinePool = "MachinePool"
	KindHypervisor  = "Hypervisor"
)

// RoleHypervisor is the role of a host whose agent runs libvirt domains for
// machine pools.
const RoleHypervisor Role = "hypervisor"

// MachineKind says who creates a machine.
type MachineKind string

// Machine kinds.
const (
	// MachineLibvirt is a VM that nico creates on a hypervisor host.
	MachineLibvirt MachineKind = "libvirt"
	// MachineExternal is managed outside nico: registered by its own agent,
	// only on- and off-boarded by nico.
	MachineExternal MachineKind = "external"
)

// Machine is one machine of the fleet. For a libvirt machine the leader
// writes spec (the pool's template and the host it is placed on) and the
// host's agent writes the domain's state into status.
type Machine struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta    `json:"metadata"`
	Spec     MachineSpec   `json:"spec"`
	Status   MachineStatus `json:"status"`
}

// MachineSpec is the desired machine.
type MachineSpec struct {
	Kind MachineKind `json:"kind"`
	// Pool is the MachinePool the machine belongs to; Ordinal its index there.
	Pool    string `json:"pool,omitempty"`
	Ordinal int    `json:"ordinal,omitempty"`
	// Claim is the MachineClaim that asked for the machine ("": the pool's
	// own count). A claimed machine lives as long as its claim lists it.
	Claim string `json:"claim,omitempty"`
	// UUID is the libvirt domain's UUID, chosen once by the leader: the host
	// reconciles domains keyed by it.
	UUID string `json:"uuid,omitempty"`
	// Host is the hypervisor node the machine is placed on ("" while it is
	// Pending).
	Host     string          `json:"host,omitempty"`
	Template MachineTemplate `json:"template"`
	// Deleting asks the host to shut the domain down and undefine it with
	// its volumes. The leader sets it only once the machine's node has left
	// the cluster.
	Deleting bool `json:"deleting,omitempty"`
}

// MachineTemplate is what a machine is made of.
type MachineTemplate struct {
	VCPUs     int `json:"vcpus"`
	MemoryMiB int `json:"memoryMiB"`
	DiskGiB   int `json:"diskGiB"`
	// StoragePool holds the base image and the machine's overlay volume.
	StoragePool string `json:"storagePool,omitempty"`
	// BaseImage is the volume (in StoragePool) the overlay is backed by.
	BaseImage string `json:"baseImage"`
	// Network is the libvirt network the machine's interface is on.
	Network string `json:"network"`
	// Roles are handed to the machine's agent at first boot.
	Roles []Role `json:"roles,omitempty"`
	// Boot, when set, boots the machines directly from a kernel and initrd
	// on the hypervisor host rather than from their disk.
	Boot *KernelBoot `json:"boot,omitempty"`
}

// KernelBoot is a direct kernel boot: absolute paths on the hypervisor host.
type KernelBoot struct {
	Kernel  string `json:"kernel"`
	Initrd  string `json:"initrd,omitempty"`
	Cmdline string `json:"cmdline,omitempty"`
}

// MachinePhase is where a machine is in its life.
//
//	Pending --placed--> Provisioning --domain running--> Running
//	   ^                     |                              |
//	   +-(no room anywhere)  +----------(Deleting)----------+--> Deleting --undefined--> Deleted
type MachinePhase string

// Machine phases.
const (
	MachinePending      MachinePhase = "Pending"
	MachineProvisioning MachinePhase = "Provisioning"
	MachineRunning      MachinePhase = "Running"
	MachineStopped      MachinePhase = "Stopped"
	MachineDeleting     MachinePhase = "Deleting"
	MachineDeleted      MachinePhase = "Deleted"
	MachineFailed       MachinePhase = "Failed"
)

// MachineStatus is what was observed.
type MachineStatus struct {
	Phase MachinePhase `json:"phase,omitempty"`
	// Discoverable: the machine's agent has registered its node.
	Discoverable bool `json:"discoverable"`
	// HasConfiguration: the machine has a desired configuration.
	HasConfiguration bool `json:"hasConfiguration"`
	// DomainState is libvirt's state of the domain (running, shutoff...).
	DomainState string      `json:"domainState,omitempty"`
	Addresses   []string    `json:"addresses,omitempty"`
	Conditions  []Condition `json:"conditions,omitempty"`
	UpdatedAt   time.Time   `json:"updatedAt,omitempty"`
}

// NewMachine returns a Machine named name.
func NewMachine(name string) *Machine {
	return &Machine{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindMachine}, Metadata: ObjectMeta{Name: name}}
}

// GetTypeMeta implements Object.
func (m *Machine) GetTypeMeta() *TypeMeta { return &m.TypeMeta }

// GetMetadata implements Object.
func (m *Machine) GetMetadata() *ObjectMeta { return &m.Metadata }

// DefaultStoragePool is the storage pool used when a template names none.
const DefaultStoragePool = "default"

// StoragePoolName returns the template's storage pool, or the default.
func (t MachineTemplate) StoragePoolName() string {
	if t.StoragePool == "" {
		return DefaultStoragePool
	}
	return t.StoragePool
}

// Image returns the base image as "pool/volume", as hosts report images.
func (t MachineTemplate) Image() string { return t.StoragePoolName() + "/" + t.BaseImage }
