package coordinator

import (
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestNamespacedClusterThroughTheController: a cluster with
// spec.etcd.namespace gets a cluster.nix whose etcd section asks for the
// namespacing proxy (no prefix), and an etcd role that reaches all of
// /clusters/<c>/ (the proxy's namespace) and nothing else.
func TestNamespacedClusterThroughTheController(t *testing.T) {
	t.Parallel()
	h := newKCHarness(t)
	ctx := t.Context()
	var err error
	if h.nodeCA, err = pki.NewCA("nico", time.Hour, time.Now()); err != nil {
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
	root := etcdtest.NewClient(t, h.cl.Endpoints()...)
	h.c.cfg.Clusters.Secrets = &KubePKISecrets{Secrets: secrets.New(h.st, box), Store: h.st, Root: root, NicoCA: h.nodeCA, Now: func() time.Time { return h.now }}
	h.machine("cp-1", "role", "cp")
	h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
	kc := selectorCluster("k1", 1, 0)
	kc.Spec.Etcd.Namespace = true
	h.create(kc)
	h.untilPhase(api.ClusterReady)

	nix := h.config("cp-1").Spec.AdditionalFiles[0].Inline
	for _, want := range []string{
		"prefix = null;",
		`proxy = { namespace = "/clusters/k1/"; listen = { host = "127.0.0.1"; port = 2479; }; clientCommonName = "kubernetes:k1"; };`,
	} {
		if !strings.Contains(nix, want) {
			t.Errorf("cluster.nix has no %q:\n%s", want, nix)
		}
	}
	role, err := root.RoleGet(ctx, kubepki.EtcdUser("k1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(role.Perm) != 1 || string(role.Perm[0].Key) != "/clusters/k1/" || string(role.Perm[0].RangeEnd) != clientv3.GetPrefixRangeEnd("/clusters/k1/") {
		t.Fatalf("role %s: %+v, want read-write on /clusters/k1/ alone", kubepki.EtcdUser("k1"), role.Perm)
	}
}
