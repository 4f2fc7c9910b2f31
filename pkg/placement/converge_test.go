package placement

import (
	"testing"

	"github.com/homystack/nico/pkg/api"
)

// TestPlansConverge feeds each plan's writes back as the next input: the
// planner must reach a plan that writes nothing.
func TestPlansConverge(t *testing.T) {
	for _, p := range []*api.MachinePool{pool("web", 3), pool("bad", -1), pool("big", 20)} {
		in := Input{Now: now, Pools: []*api.MachinePool{p}, Hosts: []*Host{host("hv-1", 8, 8192)}}
		for pass := 0; ; pass++ {
			pl := Compute(in)
			if pl.Empty() {
				break
			}
			if pass == 5 {
				t.Fatalf("pool %s: still writing after %d passes: %s %+v", p.Metadata.Name, pass, pl.Counts(), pl.Pools[0].Status)
			}
			ms := map[string]*api.Machine{}
			for _, m := range in.Machines {
				ms[m.Metadata.Name] = m
			}
			for _, m := range append(pl.Create, pl.Update...) {
				m.Status.Phase = api.MachineRunning
				if m.Spec.Host == "" {
					m.Status.Phase = api.MachinePending
				}
				ms[m.Metadata.Name] = m
			}
			in.Machines = nil
			for _, m := range ms {
				in.Machines = append(in.Machines, m)
			}
			if len(pl.Pools) > 0 {
				in.Pools = pl.Pools
			}
		}
	}
}
