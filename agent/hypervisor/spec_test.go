package hypervisor

import (
	"slices"
	"testing"

	"github.com/homystack/nico/pkg/api"
)

// TestMachineSpec: what a machine's domain is asked to be, with the
// identity it is handed at first boot.
func TestMachineSpec(t *testing.T) {
	m := placedMachine("web-0", "hv-1", 0)
	eps := []string{"http://10.77.0.1:2379"}

	c := &Controller{cfg: Config{Endpoints: eps, Prefix: "/nico/v1/"}}
	s := c.spec(m)
	if !slices.Equal(s.Identity.Endpoints, eps) || s.Identity.Name != "web-0" || !slices.Equal(s.Identity.Roles, []string{"worker"}) || s.Kernel != "" {
		t.Fatalf("without a mesh: %+v", s)
	}

	// With the mesh's seeds and the token, the machine learns the endpoints
	// from gossip: it is not handed them.
	c.cfg.Seeds, c.cfg.Token = []string{"10.77.0.1:7946"}, "s3cret"
	if s := c.spec(m); len(s.Identity.Endpoints) != 0 || s.Identity.Token != "s3cret" || !slices.Equal(s.Identity.Seeds, c.cfg.Seeds) {
		t.Fatalf("with a mesh: %+v", s.Identity)
	}

	m.Spec.Template.Boot = &api.KernelBoot{Kernel: "/k", Initrd: "/i", Cmdline: "console=ttyS0"}
	m.Spec.Template.Roles = []api.Role{api.RoleControlPlane}
	if s := c.spec(m); s.Kernel != "/k" || s.Initrd != "/i" || s.Cmdline != "console=ttyS0" || !slices.Equal(s.Identity.Roles, []string{"controlPlane"}) {
		t.Fatalf("kernel boot: %+v", s)
	}
}
