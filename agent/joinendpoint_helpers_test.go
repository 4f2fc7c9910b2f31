package agent

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/agent/joinendpoint"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/secretbox"
)

// controlPlaneDir writes what a control-plane machine's pki.dir holds
// after ensurePKI: the cluster CA (etcdtest's, which the members trust),
// the secrets key and the coordinator and root identities. (The join
// endpoint's tests have the same helper.)
func controlPlaneDir(t *testing.T) pki.Dir {
	t.Helper()
	d := pki.Dir(filepath.Join(t.TempDir(), "pki"))
	ca := etcdtest.PKI(t)
	if err := ca.Save(d.CACert(), d.CAKey()); err != nil {
		t.Fatal(err)
	}
	k, _ := secretbox.NewKey()
	if err := pki.WriteFile(d.SecretsKey(), k); err != nil {
		t.Fatal(err)
	}
	for leaf, cn := range map[string]string{pki.CoordinatorLeaf: pki.CoordinatorIdentity, pki.RootLeaf: pki.RootIdentity} {
		c, key, err := ca.Issue(pki.Request{CommonName: cn, Usage: pki.UsageClient}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := pki.WriteFile(d.Key(leaf), key); err != nil {
			t.Fatal(err)
		}
		if err := pki.WriteFile(d.Cert(leaf), c); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// serveJoinEndpoint runs je until ctx ends and waits until it serves; the
// returned channel gets what Run returned.
func serveJoinEndpoint(t *testing.T, ctx context.Context, je *joinendpoint.Endpoint) <-chan error {
	t.Helper()
	je.Ready = make(chan struct{})
	served := make(chan error, 1)
	go func() { served <- je.Run(ctx) }()
	select {
	case <-je.Ready:
	case err := <-served:
		t.Fatalf("join endpoint: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("join endpoint not serving within 60s")
	}
	return served
}
