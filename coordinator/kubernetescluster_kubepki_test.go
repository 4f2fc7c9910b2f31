package coordinator

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
)

// TestKubePKISecretsThroughTheController: with the kubepki secrets, the
// cluster's machines get kubeadm's host files by reference (CA keys on
// the control plane only), their values sealed to each node, the etcd
// identity exists, the kubeconfig secret is published once the control
// plane is ready; deletion removes the identity and the secrets.
func TestKubePKISecretsThroughTheController(t *testing.T) {
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
	sec := secrets.New(h.st, box)
	h.c.cfg.Clusters.Secrets = &KubePKISecrets{Secrets: sec, Store: h.st, Root: root, NicoCA: h.nodeCA, Now: func() time.Time { return h.now }}
	h.machine("cp-1", "role", "cp")
	h.machine("dp-1", "role", "dp")
	h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
	h.create(selectorCluster("k1", 1, 1))
	h.untilPhase(api.ClusterReady)

	paths := func(m string) []string {
		var out []string
		for _, f := range h.config(m).Spec.HostFiles {
			out = append(out, f.Path)
		}
		return out
	}
	if p := paths("cp-1"); !slices.Contains(p, "/etc/kubernetes/pki/ca.key") || !slices.Contains(p, "/etc/kubernetes/pki/apiserver-etcd-client.crt") {
		t.Errorf("cp-1's host files %v", p)
	}
	if p := paths("dp-1"); slices.Contains(p, "/etc/kubernetes/pki/ca.key") || !slices.Contains(p, "/etc/kubernetes/pki/ca.crt") {
		t.Errorf("dp-1's host files %v, want the CA certificate and no CA key", p)
	}
	for _, m := range []string{"cp-1", "dp-1"} {
		if err := h.st.Get(ctx, store.NodeNamedSecretsKey(m), api.NewNodeSecrets(m)); err != nil {
			t.Errorf("%s's secrets not projected: %v", m, err)
		}
	}
	if _, err := root.UserGet(ctx, kubepki.EtcdUser("k1")); err != nil {
		t.Errorf("etcd user: %v", err)
	}
	if s := h.cluster("k1").Status.KubeconfigSecret; s != "k1-kubeconfig" {
		t.Errorf("kubeconfigSecret %q", s)
	}
	kc := h.cluster("k1")
	at := h.now
	kc.Metadata.DeletionTimestamp = &at
	if err := h.st.UpdateObject(ctx, kc); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 15 && h.cluster("k1") != nil; i++ {
		h.pass()
	}
	if h.cluster("k1") != nil {
		t.Fatal("cluster not deleted")
	}
	if _, err := root.UserGet(ctx, kubepki.EtcdUser("k1")); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("etcd user after deletion: %v", err)
	}
	if err := sec.Get(ctx, store.NamedSecretKey("k1-ca"), api.NewSecret("k1-ca")); err == nil {
		t.Error("k1-ca left after deletion")
	}
}
