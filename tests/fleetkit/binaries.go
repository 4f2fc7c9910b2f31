package fleetkit

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// BinaryMember is one etcd member run from an etcd binary in a child
// process.
type BinaryMember struct {
	Name, Peer, Client string
	Runtime            member.Runtime
}

// StartBinaryMember starts one member of bin; the test's cleanup stops it.
func StartBinaryMember(ctx context.Context, tb testing.TB, bin etcdtest.Binary, name, peer, client, initial, state string) (*BinaryMember, error) {
	m := &BinaryMember{Name: name, Peer: peer, Client: client, Runtime: ExecRuntime(bin.Path)}
	cfg := member.Config{
		Name: name, DataDir: filepath.Join(tb.TempDir(), "etcd"), PeerURL: peer, ClientURL: client,
		InitialCluster: initial, ClusterState: state, ClusterToken: "binaries", TLS: etcdtest.MemberTLS(tb, name, peer, client),
	}
	tb.Cleanup(func() { _ = m.Runtime.Stop(context.Background()) })
	if err := m.Runtime.Start(ctx, cfg); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return m, nil
}

// StartBinaryCluster starts a new cluster of n members of bin, named
// cp-0..cp-(n-1), side by side.
func StartBinaryCluster(ctx context.Context, tb testing.TB, bin etcdtest.Binary, n int) []*BinaryMember {
	tb.Helper()
	names := make([]string, n)
	urls := make([][2]string, n)
	parts := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("cp-%d", i)
		peer, client := etcdtest.URLs(tb)
		urls[i] = [2]string{peer, client}
		parts[i] = names[i] + "=" + peer
	}
	initial := strings.Join(parts, ",")
	ms := make([]*BinaryMember, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ms[i], errs[i] = StartBinaryMember(ctx, tb, bin, names[i], urls[i][0], urls[i][1], initial, member.StateNew)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			tb.Fatal(err)
		}
	}
	return ms
}

// RegisterMember writes what an agent writes for a control-plane node
// whose member runs: its Node and a heartbeat on a lease that outlives
// the test.
func RegisterMember(ctx context.Context, tb testing.TB, st *store.Store, name, peer, client string) {
	tb.Helper()
	n := api.NewNode(name)
	n.Spec = api.NodeSpec{Roles: []api.Role{api.RoleControlPlane}, PeerURL: peer, ClientURL: client}
	if err := st.Put(ctx, store.NodeKey(name), n); err != nil {
		tb.Fatal(err)
	}
	lease, err := st.Client().Grant(ctx, 600)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := st.Client().Put(ctx, store.HeartbeatKey(name), "", clientv3.WithLease(lease.ID)); err != nil {
		tb.Fatal(err)
	}
}
