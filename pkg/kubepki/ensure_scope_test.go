package kubepki_test

import (
	"testing"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/store"
)

// TestEnsureReadsOnlyItsCluster: a cluster's pass reads its own secrets,
// not every cluster's (each pass of each cluster would otherwise read
// them all): another cluster's secret that cannot be opened does not
// stop it.
func TestEnsureReadsOnlyItsCluster(t *testing.T) {
	e := newEnv(t)
	ctx := ctxOf(t)
	if _, err := e.st.Client().Put(ctx, store.NamedSecretKey("other-ca"), "not sealed"); err != nil {
		t.Fatal(err)
	}
	c := kubepki.Cluster{Name: "demo", Endpoint: "https://k8s.example:6443", APIServerNames: []string{"10.0.0.11"}, Machines: []string{"cp-1"}, NicoCA: etcdtest.PKI(t)}
	if _, err := kubepki.Ensure(ctx, e.sec, c, t0); err != nil {
		t.Fatalf("ensure beside another cluster's unreadable secret: %v", err)
	}
}
