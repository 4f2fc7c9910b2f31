package joinendpoint

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/testwait"
)

// TestJoinEndpointServesAgainAfterAFailure: an endpoint whose listen
// address is taken counts as failing on its runtime (unhealthy, which the
// agent's watchdog sees), and serves once the address is free, rather than
// returning the error from Run and never serving again while the agent
// runs on, healthy.
func TestJoinEndpointServesAgainAfterAFailure(t *testing.T) {
	cl := etcdtest.StartWith(t, etcdtest.Options{TLS: true})
	blocker, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	log := logging.Test(t)
	rt := controller.New(nil, controller.WithLogger(log), controller.WithHealthPolicy(2, 0),
		controller.WithBackoff(func() backoff.BackOff { return backoff.NewConstantBackOff(20 * time.Millisecond) }))
	je := New(Config{Name: "cp-1", Dir: etcdtest.ControlPlaneDir(t), Listen: blocker.Addr().String(), Endpoints: cl.Endpoints(), Poll: 20 * time.Millisecond, Runtime: rt}, log)
	je.Ready = make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- je.Run(ctx) }()
	testwait.For(t, 30*time.Second, "unhealthy with its listen address taken", func() (bool, string) {
		return !rt.Healthy(), fmt.Sprintf("healthy: %+v", rt.Health())
	})
	blocker.Close()
	select {
	case <-je.Ready:
	case err := <-served:
		t.Fatalf("Run returned %v; want it to serve once the address is free", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not serving within 30 s of its address being free")
	}
	testwait.For(t, 30*time.Second, "healthy again once serving", func() (bool, string) {
		return rt.Healthy(), fmt.Sprintf("not healthy: %+v", rt.Health())
	})
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
