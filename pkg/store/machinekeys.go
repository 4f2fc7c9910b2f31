package store

// Key directories of the provisioning objects.
const (
	MachinesDir    = "machines/"
	PoolsDir       = "pools/"
	HypervisorsDir = "hypervisors/"
	ClaimsDir      = "machineclaims/"
)

// MachineKey is where machine name is kept.
func MachineKey(name string) string { return MachinesDir + name }

// PoolKey is where machine pool name is kept.
func PoolKey(name string) string { return PoolsDir + name }

// HypervisorKey is where hypervisor host name reports its capacity.
func HypervisorKey(name string) string { return HypervisorsDir + name }

// MachineClaimKey is where the machine claim name is kept.
func MachineClaimKey(name string) string { return ClaimsDir + name }
