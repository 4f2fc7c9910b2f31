package objectapply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
)

// header is a manifest's FlakeObjects document.
func header(lastModified int64, rev string, extra ...string) string {
	s := fmt.Sprintf("apiVersion: nico.homystack.io/v1\nkind: FlakeObjects\nmetadata: {name: flake}\nspec:\n  revision: %s\n  lastModified: %d\n", rev, lastModified)
	for _, e := range extra {
		s += "  " + e + "\n"
	}
	return s
}

func pool(name string, count int) string {
	return fmt.Sprintf("apiVersion: nico.homystack.io/v1\nkind: MachinePool\nmetadata: {name: %s}\nspec:\n  count: %d\n  template: {vcpus: 1, memoryMiB: 512, diskGiB: 4, baseImage: x.qcow2, network: default}\n", name, count)
}

func cluster(name string) string {
	return fmt.Sprintf(`apiVersion: nico.homystack.io/v1alpha1
kind: KubernetesCluster
metadata: {name: %s}
spec:
  gitRepo: https://example.org/fleet.git
  configurationSubdir: k3s
  controlPlane:
    machines: [cp-1]
`, name)
}

const etcdDoc = "apiVersion: nico.homystack.io/v1\nkind: EtcdCluster\nmetadata: {name: etcd}\nspec:\n  voters: 3\n"

func join(docs ...string) []byte { return []byte(strings.Join(docs, "---\n")) }

type fixture struct {
	t  *testing.T
	c  *Cluster
	st *store.Store
	e  *etcdtest.Cluster
}

func newFixture(t *testing.T) *fixture {
	e := etcdtest.Start(t, 1)
	t.Cleanup(e.Close)
	cli := etcdtest.NewClient(t, e.Endpoints()...)
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, c: &Cluster{Store: st, Client: cli, Health: 2 * time.Second}, st: st, e: e}
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// apply applies a manifest as host.
func (f *fixture) apply(host string, raw []byte) (FlakeResult, error) {
	f.t.Helper()
	docs, err := Split("manifest", raw)
	if err != nil {
		return FlakeResult{}, err
	}
	if err := Decode(docs, nil); err != nil {
		return FlakeResult{}, err
	}
	return f.c.ApplyFlake(ctxOf(f.t), docs, host)
}

func (f *fixture) mustApply(host string, raw []byte) FlakeResult {
	f.t.Helper()
	res, err := f.apply(host, raw)
	if err != nil {
		f.t.Fatalf("apply as %s: %v", host, err)
	}
	f.t.Logf("%s: %s\n%s", host, res.Decision.Reason, strings.Join(res.Messages, "\n"))
	return res
}

func (f *fixture) revision() int64 {
	f.t.Helper()
	rev, err := f.st.Revision(ctxOf(f.t))
	if err != nil {
		f.t.Fatal(err)
	}
	return rev
}

func (f *fixture) pool(name string) (*api.MachinePool, bool) {
	p := &api.MachinePool{}
	err := f.st.Get(ctxOf(f.t), store.PoolKey(name), p)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return p, true
}

func (f *fixture) record() *api.FlakeObjects {
	rec := &api.FlakeObjects{}
	if err := f.st.Get(ctxOf(f.t), store.FlakeObjectsKey, rec); err != nil {
		f.t.Fatal(err)
	}
	return rec
}

// TestApplyFlake: a manifest creates its objects marked as the flake's
// and records itself; the same manifest again writes nothing; an older
// one is skipped; a newer one changes, deletes and releases.
func TestApplyFlake(t *testing.T) {
	f := newFixture(t)
	f.mustApply("cp-1", join(header(100, "aaa"), etcdDoc, pool("web", 2), pool("db", 1), cluster("k1")))
	p, ok := f.pool("web")
	if !ok || p.Spec.Count != 2 || p.Metadata.Declared == nil || p.Metadata.Declared.Revision != "aaa" || p.Metadata.Declared.Host != "cp-1" {
		t.Fatalf("pool web %+v, want count 2 marked revision aaa by cp-1", p)
	}
	rec := f.record()
	if rec.Spec.Revision != "aaa" || rec.Status.Host != "cp-1" || len(rec.Status.Objects) != 4 {
		t.Fatalf("record %+v", rec)
	}

	t.Run("idempotent: the same manifest from another host writes nothing", func(t *testing.T) {
		before := f.revision()
		res := f.mustApply("cp-2", join(header(100, "aaa"), etcdDoc, pool("web", 2), pool("db", 1), cluster("k1")))
		if res.Decision.Verdict != Apply || f.revision() != before {
			t.Fatalf("verdict %v, store revision %d -> %d", res.Decision.Verdict, before, f.revision())
		}
	})

	t.Run("a newer manifest changes, deletes and releases", func(t *testing.T) {
		f.mustApply("cp-2", join(header(200, "bbb"), pool("web", 3)))
		if p, _ := f.pool("web"); p.Spec.Count != 3 || p.Metadata.Declared.Revision != "bbb" {
			t.Fatalf("pool web %+v, want count 3 of revision bbb", p)
		}
		if _, ok := f.pool("db"); ok {
			t.Fatal("pool db, no longer declared, is still there")
		}
		kc := &api.KubernetesCluster{}
		if err := f.st.Get(ctxOf(t), store.ClusterKey("k1"), kc); err != nil {
			t.Fatal(err)
		}
		if kc.Metadata.Declared != nil || kc.Metadata.DeletionTimestamp != nil {
			t.Fatalf("cluster k1 under the orphan policy: %+v, want released and not marked for deletion", kc.Metadata)
		}
		ec := &api.EtcdCluster{}
		if err := f.st.Get(ctxOf(t), store.EtcdClusterKey, ec); err != nil || ec.Metadata.Declared != nil || ec.Spec.Voters != 3 {
			t.Fatalf("EtcdCluster %+v (%v), want released with its spec", ec, err)
		}
	})

	t.Run("a host still on the older manifest is superseded and writes nothing", func(t *testing.T) {
		before := f.revision()
		res := f.mustApply("cp-3", join(header(100, "aaa"), etcdDoc, pool("web", 2), pool("db", 1), cluster("k1")))
		if res.Decision.Verdict != Superseded || f.revision() != before {
			t.Fatalf("verdict %v, store revision %d -> %d", res.Decision.Verdict, before, f.revision())
		}
	})

	t.Run("another host declaring the same revision otherwise is refused", func(t *testing.T) {
		before := f.revision()
		_, err := f.apply("cp-3", join(header(200, "bbb"), pool("web", 4)))
		var refused *RefusedError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), "applied by cp-2 with other objects") || f.revision() != before {
			t.Fatalf("err %v, store revision %d -> %d", err, before, f.revision())
		}
	})

	t.Run("a cluster under the delete policy is marked for deletion", func(t *testing.T) {
		f.mustApply("cp-1", join(header(300, "ccc"), pool("web", 3), cluster("k2")))
		f.mustApply("cp-1", join(header(400, "ddd", "kubernetesClusterRemoval: delete"), pool("web", 3)))
		kc := &api.KubernetesCluster{}
		if err := f.st.Get(ctxOf(t), store.ClusterKey("k2"), kc); err != nil {
			t.Fatal(err)
		}
		if kc.Metadata.DeletionTimestamp == nil || kc.Metadata.Declared != nil {
			t.Fatalf("cluster k2: %+v, want marked for deletion and released", kc.Metadata)
		}
	})
}

// TestApplyFlakeRefusedWritesNothing: one object refused against the
// cluster refuses the manifest: nothing of it is written, and the error
// names the field, the value and what is accepted.
func TestApplyFlakeRefusedWritesNothing(t *testing.T) {
	f := newFixture(t)
	before := f.revision()
	// An external member with the peer URL of the cluster's own member.
	bad := etcdDoc + fmt.Sprintf("  members:\n  - {name: ext-1, kind: external, peerURLs: [%q], clientURLs: [\"https://10.9.9.9:2379\"]}\n", f.e.Members[0].PeerURL)
	_, err := f.apply("cp-1", join(header(100, "aaa"), pool("web", 2), bad))
	var refused *RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("err %v, want a refusal", err)
	}
	for _, want := range []string{"spec.members[0].peerURLs[0]", f.e.Members[0].PeerURL, "declare an external member with URLs no member"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal lacks %q:\n%v", want, err)
		}
	}
	if f.revision() != before {
		t.Fatalf("store revision %d -> %d: something was written", before, f.revision())
	}
	if _, ok := f.pool("web"); ok {
		t.Fatal("pool web was written")
	}

	_, err = f.apply("cp-1", join(header(100, "aaa"), pool("web", -1)))
	var invalid *InvalidError
	if !errors.As(err, &invalid) || !strings.Contains(err.Error(), "spec.count -1") || f.revision() != before {
		t.Fatalf("err %v, store revision %d -> %d", err, before, f.revision())
	}
}

// TestApplyRefusesFlakeObjects: nicoctl's apply of an object the flake
// declares is refused without Force, and written with it.
func TestApplyRefusesFlakeObjects(t *testing.T) {
	f := newFixture(t)
	f.mustApply("cp-1", join(header(100, "aaa"), pool("web", 2)))
	docs, err := Split("web.yaml", []byte(pool("web", 5)))
	if err != nil {
		t.Fatal(err)
	}
	if err := Decode(docs, nil); err != nil {
		t.Fatal(err)
	}
	_, err = f.c.Apply(ctxOf(t), docs, Options{})
	var refused *RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "declared in the flake (revision aaa, applied by cp-1)") {
		t.Fatalf("err %v, want the flake's refusal", err)
	}
	if _, err := f.c.Apply(ctxOf(t), docs, Options{Force: true}); err != nil {
		t.Fatal(err)
	}
	p, _ := f.pool("web")
	drift, err := Drift(f.record(), api.KindMachinePool, "web", p.Spec)
	if err != nil || len(drift) != 1 || drift[0] != "spec.count: flake 2, running 5" {
		t.Fatalf("drift %q (%v)", drift, err)
	}
	// The flake's next apply writes its spec back.
	f.mustApply("cp-1", join(header(100, "aaa"), pool("web", 2)))
	if p, _ := f.pool("web"); p.Spec.Count != 2 {
		t.Fatalf("count %d after the flake's apply, want 2", p.Spec.Count)
	}
}

// TestRacingHostsEndOnTheNewest: control-plane hosts applying different
// generations at the same moment (a colmena deploy, agents restarting)
// end on the newest manifest, whatever order their transactions land in.
func TestRacingHostsEndOnTheNewest(t *testing.T) {
	f := newFixture(t)
	manifests := map[string][]byte{
		"cp-1": join(header(100, "aaa"), pool("web", 1)),
		"cp-2": join(header(300, "ccc"), pool("web", 3)),
		"cp-3": join(header(200, "bbb"), pool("web", 2), pool("db", 1)),
	}
	for round := range 5 {
		errs := make(chan error, len(manifests))
		for host, raw := range manifests {
			go func() {
				_, err := f.apply(host, raw)
				errs <- err
			}()
		}
		for range manifests {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		rec := f.record()
		p, _ := f.pool("web")
		if rec.Spec.Revision != "ccc" || p.Spec.Count != 3 || p.Metadata.Declared.Revision != "ccc" {
			t.Fatalf("round %d: record %s, pool web count %d (revision %s); want revision ccc, count 3", round, rec.Spec.Revision, p.Spec.Count, p.Metadata.Declared.Revision)
		}
		if _, ok := f.pool("db"); ok {
			t.Fatalf("round %d: pool db of the older revision bbb is there", round)
		}
	}
}
