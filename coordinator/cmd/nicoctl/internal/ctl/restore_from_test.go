package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/snapshot"
	"github.com/homystack/nico/pkg/snapshot/snapshottest"
	"github.com/homystack/nico/pkg/store"
)

// writeFleetFile writes the fleet file naming c's one member, with the
// root client identity, and returns its path.
func writeFleetFile(t *testing.T, dir string, m *etcdtest.Member) string {
	t.Helper()
	root := etcdtest.IssueFiles(t, dir, pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient})
	fleet := filepath.Join(dir, "fleet.yaml")
	yaml := fmt.Sprintf(`tls: {caFile: %q, certFile: %q, keyFile: %q}
members:
  - name: %s
    dataDir: %q
    peerURL: %s
    clientURL: %s
    tls: {trustedCAFile: %q, serverCertFile: %q, serverKeyFile: %q, peerCertFile: %q, peerKeyFile: %q}
`, root.CA, root.Cert, root.Key, m.Name, m.DataDir, m.PeerURL, m.ClientURL,
		m.TLS.TrustedCAFile, m.TLS.ServerCertFile, m.TLS.ServerKeyFile, m.TLS.PeerCertFile, m.TLS.PeerKeyFile)
	if err := os.WriteFile(fleet, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return fleet
}

// serveAgain starts m from its data dir, as its agent does after a
// restore, and returns m; stop stops it (also done when the test ends).
func serveAgain(t *testing.T, m *etcdtest.Member) (_ *etcdtest.Member, stop func()) {
	t.Helper()
	rt := member.NewEmbedded()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rt.Start(ctx, member.Config{Name: m.Name, DataDir: m.DataDir, PeerURL: m.PeerURL, ClientURL: m.ClientURL, TLS: m.TLS}); err != nil {
		t.Fatal(err)
	}
	stop = func() { _ = rt.Stop(context.Background()) }
	t.Cleanup(stop)
	return m, stop
}

// servedAgain is serveAgain's member, stopped when the test ends.
func servedAgain(t *testing.T, m *etcdtest.Member) *etcdtest.Member {
	t.Helper()
	m, _ = serveAgain(t, m)
	return m
}

// TestRestoreFromStoredSnapshot: --from takes a snapshot's name in the
// store the EtcdCluster names (or --store): an unknown name exits 4
// saying how to list the names, a truncated one is refused (exit 3)
// before anything is stopped; a restore by name that stopped at its first
// step resumes by the same name from the copy it fetched, removed once
// done; --latest fetches the newest and restores it with the cluster down.
func TestRestoreFromStoredSnapshot(t *testing.T) {
	ctx := testCtx(t)
	stDir := t.TempDir()
	c, st := snapshotFleet(t, stDir)
	m := c.Members[0]
	registerNode(t, st, m.Name, m)
	eps := c.Endpoints()
	run(t, eps, "snapshot", "save").want(t, ExitOK, nil, nil)
	name := listed(t, "--from", stDir)[0].Name
	if _, err := st.Client().Put(ctx, "/app/after", "lost by design"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fleet := writeFleetFile(t, dir, m)
	journal := fleet + ".journal.json"

	r := run(t, eps, "restore", "--from", "no-such-snapshot", "--fleet", fleet)
	r.want(t, ExitNotFound, nil, []string{"no-such-snapshot", "not found", "nicoctl snapshot list --from " + stDir})
	// A truncated copy of the snapshot under another name.
	b, err := os.ReadFile(filepath.Join(stDir, name+".db"))
	if err != nil {
		t.Fatal(err)
	}
	var meta snapshot.Meta
	mb, _ := os.ReadFile(filepath.Join(stDir, name+".json"))
	if err := json.Unmarshal(mb, &meta); err != nil {
		t.Fatal(err)
	}
	meta.Name = "cut"
	mb, _ = json.Marshal(meta)
	if err := os.WriteFile(filepath.Join(stDir, "cut.db"), b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stDir, "cut.json"), mb, 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, eps, "restore", "--from", "cut", "--fleet", fleet).want(t, ExitRefused, nil, []string{"refused, nothing stopped", "truncated"})
	run(t, eps, "restore", "--from", "bad name", "--fleet", fleet).want(t, ExitUsage, nil, []string{"--from", "letters, digits"})
	run(t, eps, "restore", "--latest", "--from", name, "--fleet", fleet).want(t, ExitUsage, nil, []string{"one of them"})
	if _, err := os.Stat(journal); !os.IsNotExist(err) {
		t.Fatalf("a refused restore left a journal (%v)", err)
	}
	if _, fenced, _ := member.ReadFence(m.DataDir); fenced {
		t.Fatal("a refused restore fenced the member")
	}
	if err := os.Remove(filepath.Join(stDir, "cut.json")); err != nil {
		t.Fatal(err)
	}

	// The name from the EtcdCluster's store; the member still serves, so
	// the restore stops at its first step, the fetched copy kept for it.
	run(t, eps, "restore", "--from", name, "--fleet", fleet).want(t, ExitRefused,
		[]string{name + " (from " + stDir, "verified"}, []string{"fetching snapshot " + name, "still serves"})
	if _, err := os.Stat(fetchedPath(journal, name)); err != nil {
		t.Fatalf("the fetched copy of an unfinished restore: %v", err)
	}
	// The cluster is down: the same name resumes it from the copy.
	m.Close()
	run(t, nil, "restore", "--from", name, "--fleet", fleet, "--timeout", "1s").want(t, ExitOK, []string{"resuming at step StopAndFence", "done in"}, nil)
	if _, err := os.Stat(fetchedPath(journal, name)); !os.IsNotExist(err) {
		t.Fatalf("the fetched copy outlived the restore (%v)", err)
	}
	// A new restore, of the newest snapshot: with the cluster down, the
	// store is --store.
	run(t, nil, "restore", "--latest", "--fleet", fleet).want(t, ExitUsage, nil, []string{"--store"})
	run(t, nil, "restore", "--latest", "--store", stDir, "--fleet", fleet, "--timeout", "1s").want(t, ExitOK,
		[]string{name + " (from " + stDir, "done in"}, []string{"fetching snapshot " + name})
	cli := etcdtest.NewClient(t, servedAgain(t, m).ClientURL)
	for key, want := range map[string]int{"/app/0": 1, "/app/after": 0} {
		got, err := cli.Get(ctx, store.DefaultPrefix+key)
		if err != nil || len(got.Kvs) != want {
			t.Fatalf("restored %s: %v %v, want %d keys", key, got, err, want)
		}
	}
	if act, _ := cli.Get(ctx, store.DefaultPrefix+store.ActiveOpKey); len(act.Kvs) != 0 {
		t.Fatalf("slot still held after the restore: %s", act.Kvs[0].Value)
	}
}

// TestRestoreFromS3Store: a snapshot saved to a real S3-compatible store
// (SeaweedFS's weed; skipped without it, as the store's contract test) is
// restored by its name with the cluster down.
func TestRestoreFromS3Store(t *testing.T) {
	w := snapshottest.StartWeed(t)
	if err := w.Store(t, "restore", "").EnsureBucket(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", w.Creds.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", w.Creds.SecretKey)
	dest := "s3://" + w.Endpoint + "/restore/fleet?tls=false"
	ctx := testCtx(t)
	c, st := snapshotFleet(t, dest)
	m := c.Members[0]
	registerNode(t, st, m.Name, m)
	run(t, c.Endpoints(), "snapshot", "save").want(t, ExitOK, []string{"stored in"}, nil)
	name := listed(t, "--from", dest)[0].Name
	if _, err := st.Client().Put(ctx, "/app/after", "lost by design"); err != nil {
		t.Fatal(err)
	}
	fleet := writeFleetFile(t, t.TempDir(), m)
	run(t, c.Endpoints(), "restore", "--from", "no-such-snapshot", "--fleet", fleet).want(t, ExitNotFound, nil, []string{"nicoctl snapshot list --from"})
	m.Close()
	run(t, nil, "restore", "--from", name, "--store", dest, "--fleet", fleet, "--timeout", "1s").want(t, ExitOK, []string{name, "done in"}, []string{"fetching snapshot " + name})
	cli := etcdtest.NewClient(t, servedAgain(t, m).ClientURL)
	for key, want := range map[string]int{"/app/0": 1, "/app/after": 0} {
		got, err := cli.Get(ctx, store.DefaultPrefix+key)
		if err != nil || len(got.Kvs) != want {
			t.Fatalf("restored %s: %v %v, want %d keys", key, got, err, want)
		}
	}
}

// TestFetchProgress: off a terminal, a large download reports each
// quarter once; a small one says nothing.
func TestFetchProgress(t *testing.T) {
	var b strings.Builder
	p := &fetchProgress{w: &b}
	const total = 128 << 20
	for n := int64(0); n <= total; n += 4 << 20 {
		p.add(n, total)
	}
	p.close()
	if got := strings.Count(b.String(), "\n"); got != 4 || !strings.Contains(b.String(), "(25%)") || !strings.Contains(b.String(), "(100%)") {
		t.Fatalf("progress of a 128 MiB fetch:\n%s", b.String())
	}
	b.Reset()
	p = &fetchProgress{w: &b}
	p.add(1<<20, 1<<20)
	if b.Len() != 0 {
		t.Fatalf("progress of a 1 MiB fetch: %q", b.String())
	}
}
