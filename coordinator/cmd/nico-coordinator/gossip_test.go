package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, ok := seed.Node(name)
		if ok && s.State == gossip.Alive && slices.Contains(s.Meta.Roles, "coordinator") && s.Meta.Name == "c-1" {
			break
		}
		select {
		case c := <-code:
			t.Fatalf("nico-coordinator exited %d before joining:\n%s", c, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the seed does not see %s alive (%+v):\n%s", name, s, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// It leads.
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if name, err := coordinator.Leader(t.Context(), st); err == nil && name == "c-1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("c-1 does not lead:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	// run has registered for SIGTERM (signal.NotifyContext) before it
	// started the mesh, so the signal stops it rather than the test.
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d after SIGTERM, want 0:\n%s", c, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("nico-coordinator did not stop on SIGTERM:\n%s", out.String())
	}
	for {
		if s, _ := seed.Node(name); s.State == gossip.Left {
			break
		}
		if time.Now().After(deadline.Add(30 * time.Second)) {
			s, _ := seed.Node(name)
			t.Fatalf("after SIGTERM the seed sees %s %s, want left", name, s.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
