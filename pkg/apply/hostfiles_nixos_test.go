package apply_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
	. "github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/apply/applytest"
)

// buildSpy is a Runner that records, when nix build runs, whether a host
// file is already there, and passes everything to the fake NixOS.
type buildSpy struct {
	Runner
	path      string
	seenAtNix *bool
}

func (b buildSpy) Run(ctx context.Context, c Cmd) ([]byte, error) {
	if c.Name == "nix" {
		_, err := os.Stat(b.path)
		*b.seenAtNix = err == nil
	}
	return b.Runner.Run(ctx, c)
}

// TestNixOSWritesHostFilesBeforeTheBuild: the nixos applier writes the
// host files before it builds (and so before activation), outside the
// checkout: none of them is in the flake directory Nix copies.
func TestNixOSWritesHostFilesBeforeTheBuild(t *testing.T) {
	root := filepath.Join(t.TempDir(), "etc-kubernetes")
	path := filepath.Join(root, "pki", "ca.key")
	var seen bool
	work := t.TempDir()
	hf := &HostFiles{Roots: []string{root}, Secrets: mapSecrets{"demo-ca": {"tls.key": []byte("KEY")}}}
	n := NewNixOS(NixOSConfig{WorkDir: work, Runner: buildSpy{Runner: applytest.New("/nix/store/initial-nixos-system-m1"), path: path, seenAtNix: &seen}, Gate: fastGate, HostFiles: hf})
	s := spec("good-1")
	s.HostFiles = []api.HostFile{{Path: path, SecretRef: &api.SecretKeyRef{Name: "demo-ca", Key: "tls.key"}}}
	if _, err := n.Apply(t.Context(), Generation{Machine: "m1", Number: 1, Spec: s}); err != nil {
		t.Fatal(err)
	}
	if !seen {
		t.Fatal("the host file was not there when nix build ran")
	}
	if readFile(t, path) != "KEY" || mode(t, path) != 0o600 {
		t.Fatalf("host file %q mode %v", readFile(t, path), mode(t, path))
	}
	err := filepath.WalkDir(work, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), "KEY") {
				t.Errorf("the secret is in the checkout: %s", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNixOSRollbackRestoresHostFiles: a generation that fails its
// activation is rolled back with the files the previous one wrote: its
// new file goes, the file it stopped listing comes back.
func TestNixOSRollbackRestoresHostFiles(t *testing.T) {
	root := filepath.Join(t.TempDir(), "etc-kubernetes")
	hf := &HostFiles{Roots: []string{root}, Manifest: filepath.Join(t.TempDir(), "host-files.json")}
	n := NewNixOS(NixOSConfig{WorkDir: t.TempDir(), Runner: applytest.New("/nix/store/initial-nixos-system-m1"), Gate: fastGate, HostFiles: hf})
	oldFile := api.HostFile{Path: root + "/old.conf", Inline: "old"}
	newFile := api.HostFile{Path: root + "/new.conf", Inline: "new"}
	s := spec("good-1")
	s.HostFiles = []api.HostFile{oldFile}
	if _, err := n.Apply(t.Context(), Generation{Machine: "m1", Number: 1, Spec: s}); err != nil {
		t.Fatal(err)
	}
	s = spec("broken")
	s.HostFiles = []api.HostFile{newFile}
	if r, err := n.Apply(t.Context(), Generation{Machine: "m1", Number: 2, Spec: s}); !errors.Is(err, ErrActivate) || !r.RolledBack {
		t.Fatalf("broken generation: %+v, %v", r, err)
	}
	if readFile(t, oldFile.Path) != "old" {
		t.Fatal("the previous generation's file was not restored")
	}
	if _, err := os.Stat(newFile.Path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the rolled-back generation's file is still there: %v", err)
	}
}
