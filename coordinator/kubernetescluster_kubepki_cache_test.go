package coordinator

import (
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// pkiCacheHarness is kcHarness with the real kubepki secrets, whose clock
// runs skew ahead of the harness's, and cluster k1 (one control-plane,
// one data-plane machine) Ready and in sync.
type pkiCacheHarness struct {
	*kcHarness
	k    *KubePKISecrets
	sec  *secrets.Store
	root *clientv3.Client
	skew time.Duration
}

func newPKICacheHarness(t *testing.T) *pkiCacheHarness {
	t.Helper()
	h := &pkiCacheHarness{kcHarness: newKCHarness(t)}
	var err error
	if h.nodeCA, err = pki.NewCA("nico", 30*24*time.Hour, h.now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	key, err := secretbox.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	box, err := secretbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	h.root = etcdtest.NewClient(t, h.cl.Endpoints()...)
	h.sec = secrets.New(h.st, box)
	h.k = &KubePKISecrets{Secrets: h.sec, Store: h.st, Root: h.root, NicoCA: h.nodeCA, Now: func() time.Time { return h.now.Add(h.skew) }}
	h.c.cfg.Clusters.Secrets = h.k
	h.machine("cp-1", "role", "cp")
	h.machine("dp-1", "role", "dp")
	h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
	h.create(selectorCluster("k1", 1, 1))
	h.untilPhase(api.ClusterReady)
	h.untilInSync()
	return h
}

func (h *pkiCacheHarness) checks() int {
	h.k.cache.mu.Lock()
	defer h.k.cache.mu.Unlock()
	return h.k.cache.checks
}

// steady runs passes until one makes no full check of k1's secrets,
// then asserts the next makes none either: the cache holds.
func (h *pkiCacheHarness) steady() {
	h.t.Helper()
	for range 5 {
		before := h.checks()
		h.pass()
		if h.checks() == before {
			h.pass()
			if h.checks() != before {
				h.t.Fatalf("a steady pass checked k1's secrets in full (%d checks, was %d)", h.checks(), before)
			}
			return
		}
	}
	h.t.Fatalf("every pass checks k1's secrets in full (%d checks)", h.checks())
}

// rev is key's modification revision, 0 when absent.
func (h *pkiCacheHarness) rev(key string) int64 {
	h.t.Helper()
	kv, err := h.st.GetKV(h.t.Context(), key)
	if err != nil {
		return 0
	}
	return kv.ModRevision
}

// TestKubePKICacheMissesNoChange: once a cluster's secrets are steady,
// its passes skip their full check; every change a full check would act
// on is acted on at the next pass all the same: a secret or a machine's
// NodeSecrets deleted out of band is made again, an etcd user deleted
// out of band is made again, a node's new certificate gets the values
// sealed to it, a machine added gets its projection, and a leaf is
// renewed as it enters its renewal window (an injected clock), though
// the last full check was minutes before.
func TestKubePKICacheMissesNoChange(t *testing.T) {
	t.Parallel()
	h := newPKICacheHarness(t)
	ctx := t.Context()
	h.steady()

	t.Run("secret deleted", func(t *testing.T) {
		if err := h.sec.Delete(ctx, store.NamedSecretKey("k1-sa")); err != nil {
			t.Fatal(err)
		}
		h.pass()
		if h.rev(store.NamedSecretKey("k1-sa")) == 0 {
			t.Fatal("k1-sa not made again")
		}
		h.steady()
	})
	t.Run("node secrets deleted", func(t *testing.T) {
		if err := h.sec.Delete(ctx, store.NodeNamedSecretsKey("dp-1")); err != nil {
			t.Fatal(err)
		}
		h.pass()
		if h.rev(store.NodeNamedSecretsKey("dp-1")) == 0 {
			t.Fatal("dp-1's NodeSecrets not projected again")
		}
		h.steady()
	})
	t.Run("etcd user deleted", func(t *testing.T) {
		if _, err := h.root.UserDelete(ctx, kubepki.EtcdUser("k1")); err != nil {
			t.Fatal(err)
		}
		h.pass()
		if _, err := h.root.UserGet(ctx, kubepki.EtcdUser("k1")); err != nil {
			t.Fatalf("etcd user not made again: %v", err)
		}
		h.steady()
	})
	t.Run("node certificate changed", func(t *testing.T) {
		ns := api.NewNodeSecrets("dp-1")
		if err := h.st.Get(ctx, store.NodeNamedSecretsKey("dp-1"), ns); err != nil {
			t.Fatal(err)
		}
		h.machine("dp-1", "role", "dp") // a new certificate
		h.pass()
		after := api.NewNodeSecrets("dp-1")
		if err := h.st.Get(ctx, store.NodeNamedSecretsKey("dp-1"), after); err != nil {
			t.Fatal(err)
		}
		if after.Spec.Digest == ns.Spec.Digest {
			t.Fatal("dp-1's values not sealed to its new certificate")
		}
		h.steady()
	})
	t.Run("machine added", func(t *testing.T) {
		h.machine("dp-2", "role", "dp")
		h.update(func(kc *api.KubernetesCluster) { kc.Spec.DataPlane.MachineSet.Count = 2 })
		for i := 0; i < 10 && h.rev(store.NodeNamedSecretsKey("dp-2")) == 0; i++ {
			h.pass()
		}
		if h.rev(store.NodeNamedSecretsKey("dp-2")) == 0 {
			t.Fatal("dp-2 never got its projection")
		}
		if h.rev(store.NamedSecretKey(kubepki.SSHSecret("k1", "dp-2"))) == 0 {
			t.Fatal("dp-2 never got its SSH key")
		}
		h.steady()
	})
	t.Run("leaf renewed in its window", func(t *testing.T) {
		s := api.NewSecret(kubepki.APIServerSecret("k1"))
		if err := h.sec.Get(ctx, store.NamedSecretKey(s.Metadata.Name), s); err != nil {
			t.Fatal(err)
		}
		cert, err := pki.ParseCert(s.Spec.Data[kubepki.KeyCert])
		if err != nil {
			t.Fatal(err)
		}
		renewAt := cert.NotAfter.Add(-cert.NotAfter.Sub(cert.NotBefore) / 3)
		// Five minutes before the window: a full check (the clock
		// jumped), nothing due; then steady.
		h.skew = renewAt.Add(-5 * time.Minute).Sub(h.now)
		h.pass()
		if s.Metadata.Revision != h.rev(store.NamedSecretKey(s.Metadata.Name)) {
			t.Fatal("the serving certificate renewed before its window")
		}
		h.steady()
		// A minute into the window, six minutes after the last full
		// check: renewed.
		h.skew = renewAt.Add(time.Minute).Sub(h.now)
		h.pass()
		if s.Metadata.Revision == h.rev(store.NamedSecretKey(s.Metadata.Name)) {
			t.Fatal("the serving certificate not renewed in its window")
		}
	})
}

// TestEnsureCacheTerms: an entry holds in its own term only, and a new
// term drops the entries of the one before.
func TestEnsureCacheTerms(t *testing.T) {
	t.Parallel()
	var c ensureCache
	now := time.Unix(1_700_000_000, 0)
	a, b := store.Fence{Key: "election/a", Rev: 10}, store.Fence{Key: "election/b", Rev: 20}
	marks := ensureMarks{keys: []keyRevision{{key: "k1-ca", rev: 5}}, auth: 3}
	e := ensureEntry{inputs: "k1", marks: marks, at: now, until: now.Add(time.Minute)}
	c.remember(a, "k1", e)
	c.remember(a, "k2", e)
	switch {
	case !c.fresh(a, "k1", "k1", marks, now):
		t.Fatal("not fresh in its term")
	case c.fresh(b, "k1", "k1", marks, now):
		t.Fatal("fresh in another term")
	case c.fresh(a, "k1", "k1 changed", marks, now):
		t.Fatal("fresh with other inputs")
	case c.fresh(a, "k1", "k1", ensureMarks{keys: marks.keys, auth: 4}, now):
		t.Fatal("fresh with another auth revision")
	case c.fresh(a, "k1", "k1", ensureMarks{keys: []keyRevision{{key: "k1-ca", rev: 6}}, auth: 3}, now):
		t.Fatal("fresh with a key changed")
	case c.fresh(a, "k1", "k1", marks, now.Add(time.Minute)):
		t.Fatal("fresh at until")
	case c.fresh(a, "k1", "k1", marks, now.Add(-time.Second)):
		t.Fatal("fresh before the check (the clock went back)")
	}
	c.remember(b, "k1", e)
	if c.fresh(b, "k2", "k1", marks, now) {
		t.Fatal("the old term's k2 survived the new term")
	}
	if !c.fresh(b, "k1", "k1", marks, now) {
		t.Fatal("not fresh in the new term")
	}
}
