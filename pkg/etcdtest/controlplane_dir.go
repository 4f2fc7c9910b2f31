package etcdtest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/secretbox"
)

// ControlPlaneDir writes what a control-plane machine's pki.dir holds once
// the agent made it: the cluster CA (PKI's, which the test members trust),
// the secrets key and the coordinator and root identities.
func ControlPlaneDir(t testing.TB) pki.Dir {
	t.Helper()
	d := pki.Dir(filepath.Join(t.TempDir(), "pki"))
	ca := PKI(t)
	if err := ca.Save(d.CACert(), d.CAKey()); err != nil {
		t.Fatal(err)
	}
	k, err := secretbox.NewKey()
	if err != nil {
		t.Fatal(err)
	}
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
