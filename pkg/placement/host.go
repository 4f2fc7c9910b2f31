package placement

import (
	"fmt"
	"slices"
	"strings"

	"github.com/homystack/nico/pkg/api"
)

// Host is one hypervisor host as the planner sees it.
type Host struct {
	Name   string
	Alive  bool
	Labels map[string]string
	Report api.HypervisorStatus
	// used is what machines placed on the host take; filled by the planner.
	used    usage
	perPool map[string]int
}

// usage is the resources machines take.
type usage struct {
	vcpus, memMiB int
	diskGiB       map[string]int
}

func (u *usage) add(t api.MachineTemplate, sign int) {
	u.vcpus += sign * t.VCPUs
	u.memMiB += sign * t.MemoryMiB
	if u.diskGiB == nil {
		u.diskGiB = map[string]int{}
	}
	u.diskGiB[t.StoragePoolName()] += sign * t.DiskGiB
}

// matches tells whether the host's labels have every pair of sel.
func (h *Host) matches(sel map[string]string) bool {
	for k, v := range sel {
		if h.Labels[k] != v {
			return false
		}
	}
	return true
}

// offers tells what of t the host lacks regardless of load ("" when none):
// the network, the base image, or enough total memory, vCPUs or disk.
func (h *Host) offers(t api.MachineTemplate) string {
	switch {
	case !slices.Contains(h.Report.Networks, t.Network):
		return fmt.Sprintf("no network %q", t.Network)
	case !slices.Contains(h.Report.Images, t.Image()):
		return fmt.Sprintf("no base image %q", t.Image())
	case h.Report.MemoryMiB < t.MemoryMiB:
		return fmt.Sprintf("memory %d MiB in all < %d MiB", h.Report.MemoryMiB, t.MemoryMiB)
	case h.Report.VCPUs < t.VCPUs:
		return fmt.Sprintf("%d vCPUs in all < %d", h.Report.VCPUs, t.VCPUs)
	case h.Report.DiskGiB[t.StoragePoolName()] < t.DiskGiB:
		return fmt.Sprintf("storage pool %q %d GiB in all < %d GiB", t.StoragePoolName(), h.Report.DiskGiB[t.StoragePoolName()], t.DiskGiB)
	}
	return ""
}

// lacks tells what the host lacks to take t now ("" when it has room).
func (h *Host) lacks(t api.MachineTemplate) string {
	if !h.Alive {
		return "host is not alive"
	}
	return h.lacksRoom(t)
}

// lacksRoom is lacks without the liveness check: a resize on a host that
// keeps running its machine needs room, not a live heartbeat.
func (h *Host) lacksRoom(t api.MachineTemplate) string {
	if why := h.offers(t); why != "" {
		return why
	}
	var miss []string
	if free := h.Report.MemoryMiB - h.used.memMiB; free < t.MemoryMiB {
		miss = append(miss, fmt.Sprintf("memory %d MiB free < %d MiB", free, t.MemoryMiB))
	}
	if free := h.Report.VCPUs - h.used.vcpus; free < t.VCPUs {
		miss = append(miss, fmt.Sprintf("%d vCPUs free < %d", free, t.VCPUs))
	}
	sp := t.StoragePoolName()
	if free := h.Report.DiskGiB[sp] - h.used.diskGiB[sp]; free < t.DiskGiB {
		miss = append(miss, fmt.Sprintf("disk %d GiB free in %q < %d GiB", free, sp, t.DiskGiB))
	}
	return strings.Join(miss, ", ")
}

func (h *Host) freeMem() int { return h.Report.MemoryMiB - h.used.memMiB }
