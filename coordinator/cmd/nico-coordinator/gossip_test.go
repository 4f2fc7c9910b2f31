package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// TestJoinsTheMeshFromASeed: nico-coordinator, given one seed and the
// token file, joins the mesh as "<name>/coordinator" with the coordinator
// role, leads, and on SIGTERM leaves the mesh (seen left, not dead) and
// exits 0.
func TestJoinsTheMeshFromASeed(t *testing.T) {
	cl := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: true})
	dir := t.TempDir()
	id := etcdtest.IssueFiles(t, filepath.Join(dir, "pki"), pki.Request{CommonName: pki.CoordinatorIdentity, Usage: pki.UsageClient})
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("coordinator-test-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	seed, err := gossip.New(gossip.Config{Name: "seed", BindAddr: "127.0.0.95", Profile: gossip.ProfileFast,
		Token: []byte("coordinator-test-token"), Logger: logging.Test(t)})
	if err != nil {
		t.Fatal(err)
	}
	stopSeed, err := gossip.Background(context.Background(), seed, logging.Test(t))
	if err != nil {
		t.Fatal(err)
	}
	defer stopSeed()

	var out logging.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"--name", "c-1", "--etcd.endpoints", cl.Endpoints()[0], "--tokenFile", tokenFile,
			"--tls.caFile", id.CA, "--tls.certFile", id.Cert, "--tls.keyFile", id.Key,
			"--gossip.seeds", seed.Addr(), "--gossip.bind", "127.0.0.96", "--gossip.port", "0", "--gossip.profile", "fast",
			"--coordinator.resyncInterval", "200ms"}, &out)
	}()
	const name = "c-1/coordinator"
	// running fails the test when nico-coordinator exited before what it
	// waits for.
	running := func(what string) {
		select {
		case c := <-code:
			t.Fatalf("nico-coordinator exited %d before %s:\n%s", c, what, out.String())
		default:
		}
	}
	testwait.For(t, 30*time.Second, "the seed to see "+name+" alive", func() (bool, string) {
		running("joining")
		s, ok := seed.Node(name)
		if ok && s.State == gossip.Alive && slices.Contains(s.Meta.Roles, "coordinator") && s.Meta.Name == "c-1" {
			return true, ""
		}
		return false, fmt.Sprintf("the seed sees %+v:\n%s", s, out.String())
	})
	// It leads.
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "c-1 to lead", func() (bool, string) {
		running("leading")
		name, err := coordinator.Leader(t.Context(), st)
		return err == nil && name == "c-1", fmt.Sprintf("leader %q (%v):\n%s", name, err, out.String())
	})

	// run has registered for SIGTERM (signal.NotifyContext) before it
	// started the mesh, so the signal stops it rather than the test.
	stopCoordinator(t, code, &out)
	testwait.For(t, 30*time.Second, "the seed to see "+name+" left after SIGTERM", func() (bool, string) {
		s, _ := seed.Node(name)
		return s.State == gossip.Left, fmt.Sprintf("the seed sees %s %s, want left", name, s.State)
	})
}
