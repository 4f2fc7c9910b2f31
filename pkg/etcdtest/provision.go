package etcdtest

import (
	"os"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/pki"
)

// ProvisionPKI fills an agent's empty pki.dir from PKI(t), as a join would:
// a control-plane machine gets ca.crt and ca.key (its agent issues its own
// certificates), any other ca.crt and the node certificate of name. A dir
// that already has ca.crt is left alone (a restarted agent).
func ProvisionPKI(t testing.TB, d pki.Dir, name string, controlPlane bool) {
	t.Helper()
	if _, err := os.Stat(d.CACert()); err == nil {
		return
	}
	ca := PKI(t)
	if controlPlane {
		if err := ca.Save(d.CACert(), d.CAKey()); err != nil {
			t.Fatalf("etcdtest: %v", err)
		}
		return
	}
	cert, key, err := ca.Issue(pki.Request{CommonName: pki.NodeIdentity(name), Usage: pki.UsageClient}, time.Now())
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	// ca.crt last: an agent reads a dir with ca.crt as complete.
	for _, f := range []struct {
		path string
		data []byte
	}{{d.Key(pki.NodeLeaf), key}, {d.Cert(pki.NodeLeaf), cert}, {d.CACert(), ca.CertPEM}} {
		if err := pki.WriteFile(f.path, f.data); err != nil {
			t.Fatalf("etcdtest: %v", err)
		}
	}
}
