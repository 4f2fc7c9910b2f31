package member_test

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"github.com/homystack/nico/pkg/member"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// removedMaintenance answers Status and Snapshot the way etcd's do when a
// call races the member's removal: it panics.
type removedMaintenance struct {
	pb.UnimplementedMaintenanceServer
	calls int
}

func (m *removedMaintenance) Status(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
	m.calls++
	panic("failed to find local ID in cluster members")
}

func (m *removedMaintenance) Snapshot(*pb.SnapshotRequest, grpc.ServerStreamingServer[pb.SnapshotResponse]) error {
	m.calls++
	panic("failed to find local ID in cluster members")
}

// TestServerGuardRefusesAPanickingCall: behind ServerGuard, a client call
// that panics in the server is answered Unavailable and the process goes
// on; the gate then refuses every call without reaching the server.
func TestServerGuardRefusesAPanickingCall(t *testing.T) {
	for _, call := range []struct {
		name string
		do   func(context.Context, pb.MaintenanceClient) error
	}{
		{"unary", func(ctx context.Context, c pb.MaintenanceClient) error {
			_, err := c.Status(ctx, &pb.StatusRequest{})
			return err
		}},
		{"stream", func(ctx context.Context, c pb.MaintenanceClient) error {
			s, err := c.Snapshot(ctx, &pb.SnapshotRequest{})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}},
	} {
		t.Run(call.name, func(t *testing.T) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := grpc.NewServer(member.ServerGuard(slog.New(slog.DiscardHandler))...)
			m := &removedMaintenance{}
			pb.RegisterMaintenanceServer(srv, m)
			served := make(chan error, 1)
			go func() { served <- srv.Serve(lis) }()
			t.Cleanup(func() {
				srv.Stop()
				if err := <-served; err != nil {
					t.Errorf("serve: %v", err)
				}
			})
			conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			c := pb.NewMaintenanceClient(conn)
			for i := range 2 {
				if err := call.do(t.Context(), c); status.Code(err) != codes.Unavailable {
					t.Fatalf("call %d: %v, want Unavailable", i+1, err)
				}
			}
			if m.calls != 1 {
				t.Fatalf("the server was called %d times, want once: the gate refuses after the panic", m.calls)
			}
		})
	}
}
