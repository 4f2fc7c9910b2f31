package agent

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/member/membertest"
	"github.com/homystack/nico/pkg/pki"
)

// leavesAgent is the bootstrap control-plane machine cp-1 with its
// pki.dir in d and its member run by rt.
func leavesAgent(t *testing.T, d pki.Dir, rt member.Runtime) *Agent {
	return New(Config{
		Name: "cp-1", Roles: []api.Role{api.RoleControlPlane}, Bootstrap: true,
		PeerURL: "https://127.0.0.1:2380", ClientURL: "https://127.0.0.1:2379",
		DataDir: filepath.Join(t.TempDir(), "member"), PKI: PKIConfig{Dir: d},
	}, rt, quietNotifier{}, logging.Test(t))
}

// TestMemberLeavesIssuedAlongside: ensurePKI returns once the client
// leaves (node, root) are written, while the member's and the
// coordinator's are still being issued; the member starts only once they
// are written.
func TestMemberLeavesIssuedAlongside(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	d := pki.Dir(dir)
	rt := membertest.NewFake()
	a := leavesAgent(t, d, rt)
	held, release := make(chan struct{}), make(chan struct{})
	a.leaves.hold = func() { close(held); <-release }
	ctx := t.Context()
	if err := a.ensurePKI(ctx); err != nil {
		t.Fatal(err)
	}
	<-held
	for _, name := range []string{certNode, certRoot} {
		if !exists(d.Cert(name)) || !exists(d.Key(name)) {
			t.Errorf("ensurePKI returned without the %s pair", name)
		}
	}
	for _, name := range []string{certEtcdServer, certEtcdPeer, certCoordinator} {
		if exists(d.Cert(name)) {
			t.Errorf("%s was written while its pass was held", name)
		}
	}

	// The member starts with its pairs in place.
	var missing []string
	rt.FailStart(func(member.Config) error {
		for _, name := range []string{certEtcdServer, certEtcdPeer, certCoordinator} {
			if _, err := tls.LoadX509KeyPair(d.Cert(name), d.Key(name)); err != nil {
				missing = append(missing, name)
			}
		}
		return nil
	})
	started := make(chan error, 1)
	go func() { started <- a.member.launch(ctx, "cp-1=https://127.0.0.1:2380", "new") }()
	close(release)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if len(rt.Starts()) != 1 || len(missing) > 0 {
		t.Fatalf("starts %d; pairs missing at the start: %v", len(rt.Starts()), missing)
	}
	// The renewal controller's first pass finds them all valid.
	before, _ := os.ReadFile(d.Cert(certEtcdPeer))
	if err := a.certRenewal().Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(d.Cert(certEtcdPeer)); string(after) != string(before) {
		t.Error("the renewal controller issued etcd-peer again")
	}
}

// TestMemberLeavesFailure: a pass issuing the member's leaves alongside
// that fails fails leaves.wait, naming the leaf, and so the member's
// start; the client leaves are there.
func TestMemberLeavesFailure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	d := pki.Dir(dir)
	if err := os.MkdirAll(d.Cert(certEtcdPeer), 0o700); err != nil { // a file cannot be renamed over it
		t.Fatal(err)
	}
	rt := membertest.NewFake()
	a := leavesAgent(t, d, rt)
	ctx := t.Context()
	if err := a.ensurePKI(ctx); err != nil {
		t.Fatal(err)
	}
	if a.tls == nil || !exists(d.Cert(certRoot)) {
		t.Fatal("no client identity")
	}
	err := a.member.launch(ctx, "cp-1=https://127.0.0.1:2380", "new")
	if err == nil || !strings.Contains(err.Error(), `"etcd-peer"`) {
		t.Fatalf("member.launch = %v, want the etcd-peer pass's error", err)
	}
	if len(rt.Starts()) != 0 {
		t.Error("the member started without its certificates")
	}
}
