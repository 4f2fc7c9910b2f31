package restore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/snapshot"
	"go.uber.org/zap"
)

const prefix = config.DefaultPrefix

// testFleet is n members of one etcd cluster, run by this test.
type testFleet struct {
	*LocalFleet
	t *testing.T
}

// newRuntime makes the runtimes under test: embedded, or the etcd binary
// at bin.
func newRuntime(bin string) member.Runtime {
	if bin == "" {
		return member.NewEmbedded(member.WithTimings(50*time.Millisecond, 500*time.Millisecond))
	}
	return member.NewExec(bin, member.WithTimings(50*time.Millisecond, 500*time.Millisecond))
}

// startFleet starts n members as one new cluster.
func startFleet(t *testing.T, n int, bin string) *testFleet {
	t.Helper()
	dir := t.TempDir()
	f := &testFleet{LocalFleet: &LocalFleet{ClusterToken: "restored-" + t.Name(), Log: logging.Test(t)}, t: t}
	var initial []string
	for i := range n {
		peer, client := etcdtest.URLsFor(t, false)
		m := &LocalMember{Name: fmt.Sprintf("cp-%d", i+1), DataDir: filepath.Join(dir, fmt.Sprintf("cp-%d", i+1)), PeerURL: peer, ClientURL: client, Runtime: newRuntime(bin)}
		f.Members = append(f.Members, m)
		initial = append(initial, m.Name+"="+peer)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, m := range f.Members {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			errs[i] = m.Runtime.Start(ctx, member.Config{Name: m.Name, DataDir: m.DataDir, PeerURL: m.PeerURL, ClientURL: m.ClientURL,
				InitialCluster: strings.Join(initial, ","), ClusterState: member.StateNew, ClusterToken: "old-" + t.Name()})
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, m := range f.Members {
			_ = m.Runtime.Stop(context.Background())
		}
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *testFleet) client() *clientv3.Client {
	f.t.Helper()
	cli, err := f.Client(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { cli.Close() })
	return cli
}

// seed writes nico's fleet identity (an EtcdCluster, a Node per member),
// as a registered fleet has.
func (f *testFleet) seed(ctx context.Context, created time.Time) {
	f.t.Helper()
	cli := f.client()
	st, err := store.New(cli, prefix)
	if err != nil {
		f.t.Fatal(err)
	}
	ec := &api.EtcdCluster{TypeMeta: api.TypeMeta{APIVersion: api.Version, Kind: api.KindEtcdCluster}, Metadata: api.ObjectMeta{Name: "etcd", CreatedAt: created}}
	if err := st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		f.t.Fatal(err)
	}
	for _, m := range f.Members {
		n := &api.Node{TypeMeta: api.TypeMeta{APIVersion: api.Version, Kind: api.KindNode}, Metadata: api.ObjectMeta{Name: m.Name, CreatedAt: created}}
		if err := st.Put(ctx, store.NodeKey(m.Name), n); err != nil {
			f.t.Fatal(err)
		}
	}
}

// save takes a snapshot from the first member into path, once that
// member has applied every write acknowledged so far (a linearizable read
// through it; a follower applies a moment after the leader acknowledged).
func (f *testFleet) save(ctx context.Context, path string) {
	f.t.Helper()
	cli, err := f.dial(f.Members[0].ClientURL)
	if err != nil {
		f.t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Get(ctx, "sync", clientv3.WithCountOnly()); err != nil {
		f.t.Fatal(err)
	}
	if _, err := snapshot.SaveWithVersion(ctx, zap.NewNop(), clientv3.Config{Endpoints: []string{f.Members[0].ClientURL}, DialTimeout: 5 * time.Second}, path); err != nil {
		f.t.Fatal(err)
	}
}

func (f *testFleet) others(target string) []string {
	var out []string
	for _, m := range f.Members {
		if m.Name != target {
			out = append(out, m.Name)
		}
	}
	return out
}
