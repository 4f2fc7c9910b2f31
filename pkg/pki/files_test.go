package pki

import (
	"os"
	"path/filepath"
	"testing"
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
