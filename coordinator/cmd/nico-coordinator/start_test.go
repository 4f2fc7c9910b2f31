package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
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

// TestJoiningHostsCoordinatorWaitsAndLearns: the coordinator of a machine
// that joins starts with gossip.seeds and no etcd.endpoints, before its
// agent has written pki/coordinator.crt. It waits for its identity, saying
// so, rather than exiting 2; once the identity is there it learns the
// etcd endpoints from the voters the mesh names and leads.
func TestJoiningHostsCoordinatorWaitsAndLearns(t *testing.T) {
	cl := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: true})
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("coordinator-test-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The machine's agent, as the mesh sees it: a voter serving clients.
	seed, err := gossip.New(gossip.Config{Name: "cp-1", BindAddr: "127.0.0.97", Profile: gossip.ProfileFast,
		Token: []byte("coordinator-test-token"), Logger: logging.Test(t),
		Meta: gossip.Meta{Name: "cp-1", Roles: []string{"controlPlane"}, ClientURL: cl.Endpoints()[0], Health: gossip.HealthOK | gossip.HealthEtcd | gossip.HealthVoter}})
	if err != nil {
		t.Fatal(err)
	}
	stopSeed, err := gossip.Background(context.Background(), seed, logging.Test(t))
	if err != nil {
		t.Fatal(err)
	}
	defer stopSeed()

	d := pki.Dir(filepath.Join(dir, "pki"))
	name := strings.NewReplacer(":", "-", "/", "-").Replace(pki.CoordinatorIdentity)
	var out logging.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"--name", "c-1", "--tokenFile", tokenFile,
			"--tls.caFile", d.CACert(), "--tls.certFile", d.Cert(name), "--tls.keyFile", d.Key(name),
			"--gossip.seeds", seed.Addr(), "--gossip.bind", "127.0.0.98", "--gossip.port", "0", "--gossip.profile", "fast",
			"--coordinator.resyncInterval", "200ms"}, &out)
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		testwait.For(t, 30*time.Second, what, func() (bool, string) {
			select {
			case c := <-code:
				t.Fatalf("nico-coordinator exited %d before %s:\n%s", c, what, out.String())
			default:
			}
			return cond(), "not yet:\n" + out.String()
		})
	}
	waitFor("log line about the identity", func() bool {
		return strings.Contains(out.String(), "waiting for this machine's coordinator identity") && strings.Contains(out.String(), d.Cert(name))
	})
	id := etcdtest.IssueFiles(t, string(d), pki.Request{CommonName: pki.CoordinatorIdentity, Usage: pki.UsageClient})
	if id.Cert != d.Cert(name) {
		t.Fatalf("issued %s, the coordinator looks for %s", id.Cert, d.Cert(name))
	}
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	waitFor("leadership", func() bool {
		name, err := coordinator.Leader(t.Context(), st)
		return err == nil && name == "c-1"
	})
	if !strings.Contains(out.String(), "etcd endpoints learned from gossip") {
		t.Errorf("the endpoints were not learned from the mesh:\n%s", out.String())
	}
	stopCoordinator(t, code, &out)
}
