package member_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEmbeddedStopWhileClientsWatch: an embedded member on TLS stops while
// clients keep watching it. Its gRPC server runs behind etcd's HTTPS server
// (grpc.Server.ServeHTTP), which keeps taking new streams while Stop waits
// for the streams it closed; clientv3 re-opens a closed watch at once on
// the same connection, and a Stop that waits for that new stream waits for
// as long as the client lives (it shows as "member did not exit within 60s"
// in TestCARotation, where coordinators watch every member).
func TestEmbeddedStopWhileClientsWatch(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		cfg := configFor(t, fmt.Sprintf("watched-%d", round), true)
		rt := member.NewEmbedded(member.WithTimings(50*time.Millisecond, 500*time.Millisecond))
		ctx := caseContext(t)
		if err := rt.Start(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		watching := make(chan struct{}, 16)
		for range 16 {
			cli := etcdtest.NewClient(t, cfg.ClientURL)
			go func() {
				for wctx.Err() == nil {
					wch := cli.Watch(clientv3.WithRequireLeader(wctx), "k", clientv3.WithCreatedNotify())
					for resp := range wch {
						if resp.Created {
							select {
							case watching <- struct{}{}:
							default:
							}
						}
					}
				}
			}()
		}
		for range 16 {
			select {
			case <-watching:
			case <-ctx.Done():
				t.Fatal("watches not created")
			}
		}
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = rt.Stop(sctx)
		scancel()
		select {
		case <-rt.Done():
		case <-time.After(60 * time.Second):
			t.Fatalf("round %d: the member did not exit within 60 s of Stop while 16 clients watch it", round)
		}
		cancel()
	}
}
