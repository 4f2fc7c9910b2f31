package api

import "time"

// MachinePool asks for Count machines made from Template. People write spec;
// the leader writes status.
type MachinePool struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta        `json:"metadata"`
	Spec     MachinePoolSpec   `json:"spec"`
	Status   MachinePoolStatus `json:"status"`
}

// MachinePoolSpec is the desired pool. People write it; a declared
// cluster that wants machines from the pool writes a MachineClaim instead,
// and the pool's machines are its count plus every claim's machines.
type MachinePoolSpec struct {
	// Count is how many machines the pool asks for.
	// Validation: 0 or more.
	Count int `json:"count"`
	// Template is what each machine is made from.
	Template MachineTemplate `json:"template"`
	// HostSelector limits the pool to hypervisor hosts whose labels have
	// every pair.
	HostSelector map[string]string `json:"hostSelector,omitempty"`
	// Spread places the pool's machines on as many hosts as possible.
	Spread bool `json:"spread,omitempty"`
}

// MachinePoolStatus is the leader's view of the pool.
type MachinePoolStatus struct {
	Machines int `json:"machines"`
	// Claimed is how many machines MachineClaims ask of the pool, beside
	// spec.count.
	Claimed    int         `json:"claimed,omitempty"`
	Running    int         `json:"running"`
	Pending    int         `json:"pending"`
	Conditions []Condition `json:"conditions,omitempty"`
	UpdatedAt  time.Time   `json:"updatedAt,omitempty"`
}

// NewMachinePool returns a MachinePool named name.
func NewMachinePool(name string) *MachinePool {
	return &MachinePool{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindMachinePool}, Metadata: ObjectMeta{Name: name}}
}

// GetTypeMeta implements Object.
func (p *MachinePool) GetTypeMeta() *TypeMeta { return &p.TypeMeta }

// GetMetadata implements Object.
func (p *MachinePool) GetMetadata() *ObjectMeta { return &p.Metadata }

// Hypervisor is a hypervisor host's report of what it can run, written by
// the host's agent.
type Hypervisor struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta       `json:"metadata"`
	Spec     HypervisorSpec   `json:"spec"`
	Status   HypervisorStatus `json:"status"`
}

// HypervisorSpec is the host's declared labels.
type HypervisorSpec struct {
	Labels map[string]string `json:"labels,omitempty"`
}

// HypervisorStatus is the host's capacity and what it offers.
type HypervisorStatus struct {
	VCPUs     int `json:"vcpus"`
	MemoryMiB int `json:"memoryMiB"`
	// DiskGiB is the capacity of each storage pool by name; the leader
	// subtracts the disks of the machines it placed on the host.
	DiskGiB map[string]int `json:"diskGiB,omitempty"`
	// Networks are the active libvirt networks.
	Networks []string `json:"networks,omitempty"`
	// Images are the base volumes, as "pool/volume".
	Images  []string `json:"images,omitempty"`
	Domains int      `json:"domains"`
	Message string   `json:"message,omitempty"`
	// DomainType is the type the host gives the domains it defines (kvm,
	// qemu), and DomainTypeReason why (hypervisor.domainType, what libvirt
	// offers, a kvm guest that did not boot).
	DomainType       string    `json:"domainType,omitempty"`
	DomainTypeReason string    `json:"domainTypeReason,omitempty"`
	UpdatedAt        time.Time `json:"updatedAt,omitempty"`
}

// NewHypervisor returns a Hypervisor named after its node.
func NewHypervisor(node string) *Hypervisor {
	return &Hypervisor{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindHypervisor}, Metadata: ObjectMeta{Name: node}}
}

// GetTypeMeta implements Object.
func (h *Hypervisor) GetTypeMeta() *TypeMeta { return &h.TypeMeta }

// GetMetadata implements Object.
func (h *Hypervisor) GetMetadata() *ObjectMeta { return &h.Metadata }
