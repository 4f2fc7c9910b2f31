package placement

import (
	"slices"

	"github.com/homystack/nico/pkg/api"
)

// The copies and comparisons the planner writes a plan with: an object is
// written only when what it owns changed.

func cloneTemplate(t api.MachineTemplate) api.MachineTemplate {
	t.Roles = slices.Clone(t.Roles)
	if t.Boot != nil {
		b := *t.Boot
		t.Boot = &b
	}
	return t
}

func templateEqual(a, b api.MachineTemplate) bool {
	return a.VCPUs == b.VCPUs && a.MemoryMiB == b.MemoryMiB && a.DiskGiB == b.DiskGiB &&
		a.StoragePoolName() == b.StoragePoolName() && a.BaseImage == b.BaseImage && a.Network == b.Network && slices.Equal(a.Roles, b.Roles) &&
		(a.Boot == nil) == (b.Boot == nil) && (a.Boot == nil || *a.Boot == *b.Boot)
}

func conditionsEqual(a, b []api.Condition) bool {
	return slices.EqualFunc(a, b, func(x, y api.Condition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message
	})
}

func statusEqual(a, b api.MachinePoolStatus) bool {
	return a.Machines == b.Machines && a.Claimed == b.Claimed && a.Running == b.Running && a.Pending == b.Pending && conditionsEqual(a.Conditions, b.Conditions)
}
