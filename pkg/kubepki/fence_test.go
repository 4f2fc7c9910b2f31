package kubepki_test

import (
	"errors"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
)

// TestDeposedLeaderPKIWriteIsRefused (real etcd): kubepki's writes made
// through a view fenced on a leader's term commit while the term holds;
// once a new leader's key replaces it, the old leader's Ensure (a new
// cluster's secrets, a machine's SSH key), a renewal, a projection and a
// release are all refused with store.ErrNotLeader and change nothing.
func TestDeposedLeaderPKIWriteIsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := ctxOf(t)
	nico := etcdtest.PKI(t)
	const leaderKey = "election/test"
	term := func() store.Fence {
		t.Helper()
		resp, err := e.root.Put(ctx, leaderKey, "c")
		if err != nil {
			t.Fatal(err)
		}
		kv, err := e.st.GetKV(ctx, leaderKey)
		if err != nil || kv.CreateRevision != resp.Header.Revision {
			t.Fatalf("leader key %v at %d: %v", kv, resp.Header.Revision, err)
		}
		return store.Fence{Key: leaderKey, Rev: kv.CreateRevision}
	}
	old := term()
	fenced := e.sec.Fenced(old)
	c := kubepki.Cluster{Name: "demo", Endpoint: "https://k8s.example:6443", Machines: []string{"cp-1"}, NicoCA: nico}
	if _, err := kubepki.Ensure(ctx, fenced, c, t0); err != nil {
		t.Fatalf("Ensure while leading: %v", err)
	}
	nodeCrt, _, err := nico.Issue(pki.Request{CommonName: pki.NodeIdentity("cp-1"), Usage: pki.UsageClient}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	crt, _ := pki.ParseCert(nodeCrt)
	l := kubepki.Layout{Cluster: "demo", NicoCACertPEM: nico.CertPEM}
	p, err := kubepki.Select(ctx, e.sec, "demo", l.HostFiles("cp-1", kubepki.RoleControlPlane))
	if err != nil {
		t.Fatal(err)
	}
	if wrote, err := kubepki.Project(ctx, e.st, &old, "cp-1", crt, p); err != nil || !wrote {
		t.Fatalf("Project while leading: wrote %v, %v", wrote, err)
	}

	// Deposed: the key is deleted and a new leader's created.
	if _, err := e.root.Delete(ctx, leaderKey); err != nil {
		t.Fatal(err)
	}
	term()
	before := revision(t, e)
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrNotLeader) {
			t.Errorf("%s by a deposed leader: %v, want store.ErrNotLeader", what, err)
		}
	}
	_, err = kubepki.Ensure(ctx, fenced, kubepki.Cluster{Name: "other", Machines: []string{"cp-1"}, NicoCA: nico}, t0)
	refused("Ensure of a new cluster", err)
	c.Machines = append(c.Machines, "w-1")
	_, err = kubepki.Ensure(ctx, fenced, c, t0)
	refused("Ensure of a new machine's SSH key", err)
	_, err = kubepki.Renew(ctx, fenced, c, t0.Add(kubepki.LeafValidity))
	refused("Renew of due leaves", err)
	p["demo-sa"] = map[string][]byte{"tls.key": []byte("changed")}
	_, err = kubepki.Project(ctx, e.st, &old, "cp-1", crt, p)
	refused("Project", err)
	refused("Unproject", kubepki.Unproject(ctx, fenced, []string{"cp-1"}))
	if after := revision(t, e); after != before {
		t.Errorf("the store moved from revision %d to %d: a deposed leader's write committed", before, after)
	}
	if err := e.sec.Get(ctx, store.NamedSecretKey(kubepki.CASecret("other")), api.NewSecret("other-ca")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("other-ca after a refused Ensure: %v, want not found", err)
	}
}

// revision is the store's current revision.
func revision(t *testing.T, e env) int64 {
	t.Helper()
	rev, err := e.st.Revision(ctxOf(t))
	if err != nil {
		t.Fatal(err)
	}
	return rev
}
