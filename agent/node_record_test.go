package agent

import (
	"sync"
	"testing"

	"github.com/homystack/nico/pkg/api"
)

func TestNodeRecord(t *testing.T) {
	var r nodeRecord
	ran := false
	if _, ok := r.update(func(*api.NodeStatus) { ran = true }); ok || ran {
		t.Fatalf("update before registration: ok %v, ran %v; want neither", ok, ran)
	}
	if _, ok := r.view(); ok {
		t.Fatal("view before registration: want none")
	}
	// A lease granted before registration goes into the adopted status.
	r.setLease(7)
	n := api.NewNode("cp-1")
	r.adopt(n)
	if v, ok := r.view(); !ok || v.Status.Lease != 7 {
		t.Fatalf("after adopt: lease %d, ok %v; want 7", v.Status.Lease, ok)
	}
	// A copy handed out does not change with the record.
	before, _ := r.view()
	after, _ := r.update(func(s *api.NodeStatus) { s.Phase = api.NodeMember })
	if before.Status.Phase == api.NodeMember || after.Status.Phase != api.NodeMember {
		t.Fatalf("phase before %q after %q", before.Status.Phase, after.Status.Phase)
	}
	// The heartbeat sets its lease while a controller changes the status.
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { r.setLease(int64(100 + i)) })
		wg.Go(func() { r.update(func(s *api.NodeStatus) { s.Message = "m" }) })
	}
	wg.Wait()
	v, _ := r.view()
	if v.Status.Lease != r.heartbeatLease() || v.Status.Lease < 100 {
		t.Fatalf("status lease %d, heartbeat lease %d; want the same, a set one", v.Status.Lease, r.heartbeatLease())
	}
}
