package pki

import (
	"bytes"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s: mode %o, want %o", path, got, want)
	}
}

func TestWriteFile(t *testing.T) {
	root := t.TempDir()
	cases := []struct {
		name    string
		path    string
		prepare func(path string)
	}{
		{"new file, new parents", filepath.Join(root, "a", "b", "x.key"), nil},
		{"replaces a wide-open file", filepath.Join(root, "c", "y.key"), func(p string) {
			os.MkdirAll(filepath.Dir(p), 0o700)
			os.WriteFile(p, []byte("old"), 0o644)
			os.Chmod(p, 0o644)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.prepare != nil {
				tc.prepare(tc.path)
			}
			if err := WriteFile(tc.path, []byte("secret")); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(tc.path)
			if err != nil || string(got) != "secret" {
				t.Fatalf("read back %q, %v", got, err)
			}
			assertMode(t, tc.path, 0o600)
			assertMode(t, filepath.Dir(tc.path), 0o700)
			// No temporary file is left behind.
			entries, _ := os.ReadDir(filepath.Dir(tc.path))
			if len(entries) != 1 {
				t.Errorf("directory holds %d entries, want 1", len(entries))
			}
		})
	}
	if err := WriteFile(filepath.Join(root, "a", "b", "x.key", "under-a-file"), nil); err == nil {
		t.Error("writing under a regular file succeeded")
	}
}

func TestDir(t *testing.T) {
	d := Dir("/var/lib/nico/pki")
	cases := map[string]string{
		d.CACert():             "/var/lib/nico/pki/ca.crt",
		d.CAKey():              "/var/lib/nico/pki/ca.key",
		d.SecretsKey():         "/var/lib/nico/pki/secrets.key",
		d.Cert(NodeLeaf):       "/var/lib/nico/pki/node.crt",
		d.Key(EtcdServerLeaf):  "/var/lib/nico/pki/etcd-server.key",
		d.Cert(EtcdPeerLeaf):   "/var/lib/nico/pki/etcd-peer.crt",
		d.Key(CoordinatorLeaf): "/var/lib/nico/pki/coordinator.key",
		d.Cert(RootLeaf):       "/var/lib/nico/pki/root.crt",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	if NodeIdentity("n1") != "node:n1" || MemberIdentity("m1") != "etcd:m1" || CoordinatorIdentity != "nico-coordinator" || RootIdentity != "root" {
		t.Error("identities changed: they are etcd user names (docs/security.md)")
	}
}

func TestWritePair(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	d := Dir(dir)
	if err := WritePair(d.Cert("x"), []byte("cert"), d.Key("x"), []byte("key")); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{d.Cert("x"): "cert", d.Key("x"): "key"} {
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", path, got, err, want)
		}
		assertMode(t, path, 0o600)
	}
	assertMode(t, dir, 0o700)
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("directory holds %d entries, want 2 (no temporary files left)", len(entries))
	}
	// A failing certificate path leaves the old key in place.
	if err := WritePair(filepath.Join(d.Cert("x"), "under-a-file"), []byte("c2"), d.Key("x"), []byte("k2")); err == nil {
		t.Fatal("writing under a regular file succeeded")
	}
	if got, _ := os.ReadFile(d.Key("x")); string(got) != "key" {
		t.Errorf("key replaced although its certificate could not be staged: %q", got)
	}
	entries, _ = os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("a failed write left %d entries, want 2", len(entries))
	}
}

// A crash after any of WritePair's renames leaves files that RecoverPair
// turns into a whole pair: the old one before the key is replaced, the new
// one after, with nothing of the write left over. Each case replays the
// renames up to the crash on real key pairs.
func TestRecoverPairAfterACrashAtEachStep(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("test-ca", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	issue := func() (certPEM, keyPEM []byte) {
		certPEM, keyPEM, err := ca.Issue(Request{CommonName: "node:n1", Usage: UsageClient}, now)
		if err != nil {
			t.Fatal(err)
		}
		return certPEM, keyPEM
	}
	oldCert, oldKey := issue()
	newCert, newKey := issue()
	steps := len(pairRenames("c", "ct", "k", "kt"))
	for _, first := range []bool{false, true} {
		for done := 0; done <= steps; done++ {
			dir := t.TempDir()
			certPath, keyPath := filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key")
			if !first {
				if err := WritePair(certPath, oldCert, keyPath, oldKey); err != nil {
					t.Fatal(err)
				}
			}
			keyTmp, err := stage(keyPath, newKey)
			if err != nil {
				t.Fatal(err)
			}
			certTmp, err := stage(certPath, newCert)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range pairRenames(certPath, certTmp, keyPath, keyTmp)[:done] {
				if err := os.Rename(r.from, r.to); err != nil {
					t.Fatal(err)
				}
			}
			os.Remove(certTmp) // what a crash leaves of the staged files is a later write's to clear
			os.Remove(keyTmp)
			for range 2 { // a second recovery finds nothing to do
				if err := RecoverPair(certPath, keyPath); err != nil {
					t.Fatalf("first write %v, crash after %d renames: %v", first, done, err)
				}
			}
			wantCert := oldCert
			if done >= 2 {
				wantCert = newCert
			}
			gotCert, cerr := os.ReadFile(certPath)
			gotKey, kerr := os.ReadFile(keyPath)
			switch {
			case first && done < 2:
				if !os.IsNotExist(cerr) || kerr == nil {
					t.Errorf("first write, crash after %d renames: a pair is left (cert %v, key %v), want none", done, cerr, kerr)
				}
			case cerr != nil || kerr != nil:
				t.Errorf("first write %v, crash after %d renames: %v, %v", first, done, cerr, kerr)
			default:
				if _, err := tls.X509KeyPair(gotCert, gotKey); err != nil {
					t.Errorf("first write %v, crash after %d renames: the pair does not match: %v", first, done, err)
				}
				if !bytes.Equal(gotCert, wantCert) {
					t.Errorf("first write %v, crash after %d renames: the certificate is not the %s one", first, done, map[bool]string{true: "new", false: "old"}[done >= 2])
				}
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if e.Name() != "node.crt" && e.Name() != "node.key" {
					t.Errorf("first write %v, crash after %d renames: %s left over", first, done, e.Name())
				}
			}
		}
	}
}

// A failed rename leaves one whole pair, not the write's next certificate.
func TestWritePairFailureLeavesAWholePair(t *testing.T) {
	dir := t.TempDir()
	certPath := filepath.Join(dir, "node.crt")
	if err := os.Mkdir(filepath.Join(dir, "node.key"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "node.key", "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WritePair(certPath, []byte("cert"), filepath.Join(dir, "node.key"), []byte("key")); err == nil {
		t.Fatal("renaming the key over a directory succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "node.key" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("a failed write left %v, want only the directory in the key's place", names)
	}
}
