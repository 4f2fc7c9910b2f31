package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

func objectsHeader(rev string, lastModified int64) string {
	return fmt.Sprintf("apiVersion: nico.homystack.io/v1\nkind: FlakeObjects\nmetadata: {name: flake}\nspec: {revision: %s, lastModified: %d}\n", rev, lastModified)
}

func objectsPool(count int) string {
	return fmt.Sprintf("apiVersion: nico.homystack.io/v1\nkind: MachinePool\nmetadata: {name: web}\nspec:\n  count: %d\n  template: {vcpus: 1, memoryMiB: 512, diskGiB: 4, baseImage: x.qcow2, network: default}\n", count)
}

// TestApplyObjectsCommand: the agent does not apply the manifest itself;
// nico-agent apply-objects (what nico-objects.service runs) applies it,
// marked as this host's, and again writes nothing; a manifest refused
// against the cluster (an external member with the agent's own peer URL)
// or on its own (a negative count) exits 2 naming the field and writes
// nothing; an older manifest is not applied (exit 0); a data-plane host
// applies nothing.
func TestApplyObjectsCommand(t *testing.T) {
	dir := t.TempDir()
	file, peer, client := writeBootstrapSettings(t, dir, "", "")
	objects := filepath.Join(dir, "objects.yaml")
	settings, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, append(settings, []byte("objects:\n  file: "+objects+"\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	manifest := func(docs ...string) {
		t.Helper()
		if err := os.WriteFile(objects, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	manifest(objectsHeader("rev-1", 1700000000), objectsPool(2))

	var out logging.Buffer
	code := make(chan int, 1)
	go func() { code <- run([]string{"--config", file}, &out) }()
	d := pki.Dir(filepath.Join(dir, "pki"))
	var st *store.Store
	testwait.For(t, 60*time.Second, "the agent's node a member", func() (bool, string) {
		select {
		case c := <-code:
			t.Fatalf("nico-agent exited %d:\n%s", c, out.String())
		default:
		}
		if st == nil {
			eps := []string{client}
			tlsCfg, err := etcdclient.Files{CA: d.CACert(), Cert: d.Cert(pki.RootLeaf), Key: d.Key(pki.RootLeaf)}.Load(eps)
			if err != nil {
				return false, err.Error()
			}
			cli, err := etcdclient.New(etcdclient.Config{Endpoints: eps, DialTimeout: 5 * time.Second, TLS: tlsCfg})
			if err != nil {
				return false, err.Error()
			}
			t.Cleanup(func() { cli.Close() })
			if st, err = store.New(cli, store.DefaultPrefix); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		n := &api.Node{}
		if err := st.Get(ctx, store.NodeKey("cp-1"), n); err != nil {
			return false, err.Error()
		}
		return n.Status.Phase == api.NodeMember, string(n.Status.Phase)
	})
	defer stopAgent(t, code, &out)

	poolRev := func() (int64, *api.MachinePool) {
		t.Helper()
		p := &api.MachinePool{}
		kv, err := st.GetKV(t.Context(), store.PoolKey("web"))
		if err != nil {
			t.Fatalf("pool web: %v", err)
		}
		if err := st.Get(t.Context(), store.PoolKey("web"), p); err != nil {
			t.Fatal(err)
		}
		return kv.ModRevision, p
	}
	if _, err := st.GetKV(t.Context(), store.PoolKey("web")); err == nil {
		t.Fatal("the agent applied the manifest itself; nico-objects.service applies it")
	}
	apply := func(want int, says string, args ...string) {
		t.Helper()
		var o bytes.Buffer
		if c := applyObjects(append([]string{"--config", file}, args...), &o, &o); c != want || !strings.Contains(o.String(), says) {
			t.Fatalf("apply-objects %v: exit %d, want %d saying %q; output:\n%s", args, c, want, says, o.String())
		}
	}
	apply(0, "MachinePool web created")
	rev, p := poolRev()
	if p.Spec.Count != 2 || p.Metadata.Declared == nil || p.Metadata.Declared.Host != "cp-1" || p.Metadata.Declared.Revision != "rev-1" {
		t.Fatalf("pool web: count %d, mark %+v; want 2 by cp-1 at rev-1", p.Spec.Count, p.Metadata.Declared)
	}
	apply(0, "apply-objects: ")
	if again, _ := poolRev(); again != rev {
		t.Fatalf("the same manifest applied again wrote pool web (revision %d -> %d)", rev, again)
	}

	for _, tc := range []struct {
		name string
		docs []string
		says []string
	}{
		{"against the cluster", []string{objectsHeader("rev-2", 1700000100), objectsPool(3), fmt.Sprintf("apiVersion: nico.homystack.io/v1\nkind: EtcdCluster\nmetadata: {name: etcd}\nspec:\n  voters: 3\n  members:\n  - {name: ext-1, kind: external, peerURLs: [%q], clientURLs: [\"http://10.9.9.9:2379\"]}\n", peer)},
			[]string{"refused, nothing written", "spec.members[0].peerURLs[0]", peer}},
		{"on its own", []string{objectsHeader("rev-2", 1700000100), objectsPool(-1)}, []string{"refused, nothing written", "spec.count -1 is not accepted; want 0 or more"}},
	} {
		manifest(tc.docs...)
		var o bytes.Buffer
		c := applyObjects([]string{"--config", file}, &o, &o)
		for _, s := range tc.says {
			if c != 2 || !strings.Contains(o.String(), s) {
				t.Fatalf("%s: exit %d, want 2 saying %q; output:\n%s", tc.name, c, s, o.String())
			}
		}
		if again, p := poolRev(); again != rev || p.Spec.Count != 2 {
			t.Fatalf("%s: pool web written (revision %d -> %d, count %d)", tc.name, rev, again, p.Spec.Count)
		}
		ec := &api.EtcdCluster{}
		if err := st.Get(t.Context(), store.EtcdClusterKey, ec); err == nil && len(ec.Spec.Members) > 0 {
			t.Fatalf("%s: the EtcdCluster has the refused members %+v", tc.name, ec.Spec.Members)
		}
	}

	manifest(objectsHeader("rev-0", 1600000000), objectsPool(5))
	apply(0, "apply-objects: not applied:")
	if again, p := poolRev(); again != rev || p.Spec.Count != 2 {
		t.Fatalf("an older manifest wrote pool web (revision %d -> %d, count %d)", rev, again, p.Spec.Count)
	}
	apply(0, "not a control-plane machine", "--roles", "worker", "--bootstrap=false", "--etcd.endpoints", client)
}
