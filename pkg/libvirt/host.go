//go:build cgo

package libvirt

import (
	"context"
	"sort"
	"strings"

	"github.com/homystack/nico/pkg/hypervisor"
	"libvirt.org/go/libvirt"
)

// Host implements hypervisor.Hypervisor: CPUs and memory from the node
// info, each active storage pool's capacity less the volumes that are not
// nico's, the active networks, the volumes that nico did not create as
// images, and the domain types of libvirt's capabilities.
func (h *Hypervisor) Host(ctx context.Context) (hypervisor.Host, error) {
	c, err := h.connect()
	if err != nil {
		return hypervisor.Host{}, err
	}
	info, err := c.GetNodeInfo()
	if err != nil {
		return hypervisor.Host{}, h.check(err, "node info")
	}
	out := hypervisor.Host{VCPUs: int(info.Cpus), MemoryMiB: int(info.Memory >> 10), DiskGiB: map[string]int{}}
	pools, err := c.ListAllStoragePools(libvirt.CONNECT_LIST_STORAGE_POOLS_ACTIVE)
	if err != nil {
		return out, h.check(err, "list storage pools")
	}
	for i := range pools {
		p := &pools[i]
		name, err := p.GetName()
		if err == nil {
			// nico's room in the pool: its capacity less what volumes that
			// are not nico's take (images, other users' disks).
			var capacity, foreign uint64
			if pi, err := p.GetInfo(); err == nil {
				capacity = pi.Capacity
			}
			vols, err := p.ListAllStorageVolumes(0)
			if err == nil {
				for j := range vols {
					if vn, err := vols[j].GetName(); err == nil && !strings.HasPrefix(vn, "nico-") {
						out.Images = append(out.Images, name+"/"+vn)
						if vi, err := vols[j].GetInfo(); err == nil {
							foreign += vi.Allocation
						}
					}
					_ = vols[j].Free()
				}
			}
			if foreign < capacity {
				out.DiskGiB[name] = int((capacity - foreign) >> 30)
			}
		}
		_ = p.Free()
	}
	nets, err := c.ListAllNetworks(libvirt.CONNECT_LIST_NETWORKS_ACTIVE)
	if err != nil {
		return out, h.check(err, "list networks")
	}
	for i := range nets {
		if n, err := nets[i].GetName(); err == nil {
			out.Networks = append(out.Networks, n)
		}
		_ = nets[i].Free()
	}
	sort.Strings(out.Images)
	sort.Strings(out.Networks)
	if out.DomainTypes, err = domainTypes(c); err != nil {
		return out, h.check(err, "capabilities")
	}
	return out, nil
}
