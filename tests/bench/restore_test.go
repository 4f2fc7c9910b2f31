package bench

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/restore"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/snapshot"
	etcdutl "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

var flagRestoreMiB = flag.Int("nico.restore-mib", 16, "MiB of data in the cluster BenchmarkRestore restores (docs/performance.md's figure: 1024)")

// BenchmarkRestore: three voters holding -nico.restore-mib MiB, one
// snapshot of them; then the time from the start of a restore to all
// three voters healthy, for nicoctl restore's Runner (verify, stop and
// fence, restore, start, journal, two learner rejoins) and, in the same
// run on the same data dirs, for the manual way: etcdutl's snapshot
// restore onto one member, start it, then for each other member wipe,
// member add --learner, start, promote until in sync.
func BenchmarkRestore(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	f, names := startRestoreFleet(b, 3)
	fill := time.Now()
	bytes := fillCluster(ctx, b, f, *flagRestoreMiB)
	b.Logf("filled %d MiB in %s", bytes>>20, time.Since(fill).Round(time.Millisecond))
	snap := filepath.Join(b.TempDir(), "snap.db")
	t0 := time.Now()
	if _, err := snapshot.SaveWithVersion(ctx, zap.NewNop(), clientv3.Config{Endpoints: []string{f.Members[0].ClientURL}, DialTimeout: 5 * time.Second}, snap); err != nil {
		b.Fatal(err)
	}
	b.Logf("snapshot saved in %s", time.Since(t0).Round(time.Millisecond))

	b.ResetTimer()
	// nico: Prepare (verify) and Runner.Run to the end, all voters healthy.
	t0 = time.Now()
	j, err := restore.Prepare(ctx, restore.Request{Snapshot: snap, Target: names[0], Members: names, Prefix: "/nico/v1/", BumpRevision: 1_000_000_000, Now: time.Now()})
	if err != nil {
		b.Fatal(err)
	}
	f.ClusterToken = "nico-" + j.ID
	last := time.Now()
	var nicoSteps []string
	r := &restore.Runner{Fleet: f, Journal: restore.FileJournal{Path: filepath.Join(b.TempDir(), "journal.json")}, Prefix: "/nico/v1/", AfterStep: func(s restore.Step) error {
		nicoSteps = append(nicoSteps, fmt.Sprintf("%s %s", s, time.Since(last).Round(time.Millisecond)))
		last = time.Now()
		return nil
	}}
	if err := r.Run(ctx, j); err != nil {
		b.Fatal(err)
	}
	allHealthy(ctx, b, f, 3)
	nico := time.Since(t0)

	// Manual: stop everything, etcdutl restore onto cp-1, start, rejoin.
	t0 = time.Now()
	var wg sync.WaitGroup
	for _, m := range f.Members {
		wg.Go(func() { _ = m.Runtime.Stop(ctx) })
	}
	wg.Wait()
	manualSteps := []string{fmt.Sprintf("stop %s", time.Since(t0).Round(time.Millisecond))}
	manualRestore(ctx, b, f, snap, &manualSteps)
	allHealthy(ctx, b, f, 3)
	manual := time.Since(t0)
	b.StopTimer()
	b.Logf("restore of %d MiB to 3 healthy voters: nicoctl restore %s, etcdutl restore + manual learner rejoins %s", bytes>>20, nico.Round(time.Millisecond), manual.Round(time.Millisecond))
	b.Logf("nico steps: %s", strings.Join(nicoSteps, ", "))
	b.Logf("manual steps: %s", strings.Join(manualSteps, ", "))
	b.ReportMetric(float64(bytes>>20), "MiB")
	b.ReportMetric(nico.Seconds(), "nico-s")
	b.ReportMetric(manual.Seconds(), "manual-s")
}

// startRestoreFleet starts n embedded members as one cluster.
func startRestoreFleet(b *testing.B, n int) (*restore.LocalFleet, []string) {
	b.Helper()
	dir := b.TempDir()
	f := &restore.LocalFleet{ClusterToken: "bench"}
	var initial, names []string
	for i := range n {
		peer, client := etcdtest.URLsFor(b, false)
		name := fmt.Sprintf("cp-%d", i+1)
		f.Members = append(f.Members, &restore.LocalMember{Name: name, DataDir: filepath.Join(dir, name), PeerURL: peer, ClientURL: client, Runtime: member.NewEmbedded()})
		initial, names = append(initial, name+"="+peer), append(names, name)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, m := range f.Members {
		wg.Go(func() {
			errs[i] = m.Runtime.Start(context.Background(), member.Config{Name: m.Name, DataDir: m.DataDir, PeerURL: m.PeerURL, ClientURL: m.ClientURL, InitialCluster: strings.Join(initial, ","), ClusterToken: "old"})
		})
	}
	wg.Wait()
	b.Cleanup(func() {
		for _, m := range f.Members {
			_ = m.Runtime.Stop(context.Background())
		}
	})
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return f, names
}

// fillCluster writes mib MiB in 256 KiB values, and nico's fleet identity.
func fillCluster(ctx context.Context, b *testing.B, f *restore.LocalFleet, mib int) int64 {
	b.Helper()
	cli, err := f.Client(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	val := make([]byte, 256<<10)
	_, _ = rand.Read(val)
	var total int64
	for i := 0; total < int64(mib)<<20; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("/data/%06d", i), string(val)); err != nil {
			b.Fatal(err)
		}
		total += int64(len(val))
	}
	st, err := store.New(cli, "/nico/v1/")
	if err != nil {
		b.Fatal(err)
	}
	ec := &api.EtcdCluster{TypeMeta: api.TypeMeta{APIVersion: api.Version, Kind: api.KindEtcdCluster}, Metadata: api.ObjectMeta{Name: "etcd", CreatedAt: time.Now()}}
	if err := st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		b.Fatal(err)
	}
	for _, m := range f.Members {
		n := &api.Node{TypeMeta: api.TypeMeta{APIVersion: api.Version, Kind: api.KindNode}, Metadata: api.ObjectMeta{Name: m.Name}}
		if err := st.Put(ctx, store.NodeKey(m.Name), n); err != nil {
			b.Fatal(err)
		}
	}
	return total
}

// manualRestore is what an operator types: etcdutl snapshot restore on
// one member, start it, then etcdctl member add --learner, start and
// member promote (until in sync) for each other member in turn.
func manualRestore(ctx context.Context, b *testing.B, f *restore.LocalFleet, snap string, steps *[]string) {
	b.Helper()
	last := time.Now()
	lap := func(what string) {
		*steps = append(*steps, fmt.Sprintf("%s %s", what, time.Since(last).Round(time.Millisecond)))
		last = time.Now()
	}
	first := f.Members[0]
	for _, m := range f.Members {
		if _, err := member.Wipe(m.DataDir, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	if err := etcdutl.NewV3(zap.NewNop()).Restore(etcdutl.RestoreConfig{SnapshotPath: snap, Name: first.Name, OutputDataDir: first.DataDir,
		PeerURLs: []string{first.PeerURL}, InitialCluster: first.Name + "=" + first.PeerURL, InitialClusterToken: "manual", RevisionBump: 1_000_000_000, MarkCompacted: true}); err != nil {
		b.Fatal(err)
	}
	lap("etcdutl restore")
	if err := first.Runtime.Start(ctx, member.Config{Name: first.Name, DataDir: first.DataDir, PeerURL: first.PeerURL, ClientURL: first.ClientURL, ClusterToken: "manual"}); err != nil {
		b.Fatal(err)
	}
	lap("start " + first.Name)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{first.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	initial := []string{first.Name + "=" + first.PeerURL}
	for _, m := range f.Members[1:] {
		var add *clientv3.MemberAddResponse
		// The operator tries again while etcd refuses for its 5 s health rule.
		if err := testwait.Until(ctx, clockwork.NewRealClock(), time.Minute, 100*time.Millisecond, func() (bool, string) {
			add, err = cli.MemberAddAsLearner(ctx, []string{m.PeerURL})
			if err != nil && !strings.Contains(err.Error(), "unhealthy cluster") {
				b.Fatal(err)
			}
			return err == nil, fmt.Sprint(err)
		}); err != nil {
			b.Fatal(err)
		}
		initial = append(initial, m.Name+"="+m.PeerURL)
		if err := m.Runtime.Start(ctx, member.Config{Name: m.Name, DataDir: m.DataDir, PeerURL: m.PeerURL, ClientURL: m.ClientURL, InitialCluster: strings.Join(initial, ","), ClusterState: member.StateExisting, ClusterToken: "manual"}); err != nil {
			b.Fatal(err)
		}
		// etcdctl member promote, again until the learner is in sync.
		if err := testwait.Until(ctx, clockwork.NewRealClock(), 10*time.Minute, 100*time.Millisecond, func() (bool, string) {
			_, err := cli.MemberPromote(ctx, add.Member.ID)
			return err == nil, fmt.Sprint(err)
		}); err != nil {
			b.Fatal(err)
		}
		lap("rejoin " + m.Name)
	}
}

// allHealthy waits until n voters answer a linearizable read each.
func allHealthy(ctx context.Context, b *testing.B, f *restore.LocalFleet, n int) {
	b.Helper()
	cli, err := f.Client(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	err = testwait.Until(ctx, clockwork.NewRealClock(), 10*time.Minute, 20*time.Millisecond, func() (bool, string) {
		list, err := cli.MemberList(ctx)
		if err != nil || len(list.Members) != n || slices.ContainsFunc(list.Members, func(x *etcdserverpb.Member) bool { return x.IsLearner }) {
			return false, fmt.Sprintf("members %v %v", list, err)
		}
		for _, m := range f.Members {
			c, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: time.Second, Logger: zap.NewNop()})
			if err != nil {
				return false, err.Error()
			}
			_, err = c.Get(ctx, "health")
			c.Close()
			if err != nil {
				return false, m.Name + ": " + err.Error()
			}
		}
		return true, ""
	})
	if err != nil {
		b.Fatalf("%d healthy voters: %v", n, err)
	}
}
