package apply_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
	. "github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/config"
)

// mapSecrets is a Secrets in memory.
type mapSecrets map[string]map[string][]byte

func (m mapSecrets) Secret(_ context.Context, name string) (map[string][]byte, error) {
	s, ok := m[name]
	if !ok {
		return nil, fmt.Errorf("secret %s: not found", name)
	}
	return s, nil
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// TestExecWritesHostFiles: the exec applier writes a generation's host
// files before its command runs (the command sees them), with their modes
// and 0700 parents, refreshes a renewed secret on an unchanged generation,
// removes what the next generation no longer lists, and restores the
// previous generation's files when it rolls back.
func TestExecWritesHostFiles(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "etc-kubernetes")
	seen := filepath.Join(dir, "seen")
	sec := mapSecrets{"demo-ca": {"tls.crt": []byte("CA-1")}}
	hf := &HostFiles{Roots: []string{root}, Manifest: filepath.Join(dir, "state", "host-files.json"), Secrets: sec}
	// The command records what it found, and fails for revision broken.
	script := `cat ` + root + `/pki/ca.crt > ` + seen + ` || exit 4
[ "$NICO_ACTION" = rollback ] || [ "$NICO_REVISION" != broken ] || exit 3`
	x, err := NewExec(ExecConfig{Command: []string{"sh", "-c", script}, Gate: fastGate, HostFiles: hf})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ca := filepath.Join(root, "pki", "ca.crt")
	tok := filepath.Join(root, "join-token")
	gen := func(n int64, rev string, files ...api.HostFile) Generation {
		return Generation{Machine: "m1", Number: n, Spec: api.NixosConfigurationSpec{Generation: n, GitRepo: "https://git.example/f", Revision: rev, HostFiles: files}}
	}
	caFile := api.HostFile{Path: ca, SecretRef: &api.SecretKeyRef{Name: "demo-ca", Key: "tls.crt"}, Mode: "0644"}
	tokFile := api.HostFile{Path: tok, Inline: "t0ken"}

	if _, err := x.Apply(ctx, gen(1, "r1", caFile, tokFile)); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, seen); got != "CA-1" {
		t.Fatalf("the command saw ca.crt %q, want CA-1 (written before it ran)", got)
	}
	if readFile(t, tok) != "t0ken" || mode(t, tok) != 0o600 || mode(t, ca) != 0o644 {
		t.Fatalf("modes: token %v, ca %v; want 0600 (default) and 0644", mode(t, tok), mode(t, ca))
	}
	if m := mode(t, filepath.Join(root, "pki")); m != 0o700 {
		t.Fatalf("parent made with %v, want 0700", m)
	}

	// The same system, a renewed secret: skipped, but the file follows.
	sec["demo-ca"]["tls.crt"] = []byte("CA-2")
	if r, err := x.Apply(ctx, gen(2, "r1", caFile, tokFile)); err != nil || !r.Skipped {
		t.Fatalf("unchanged generation: %+v, %v", r, err)
	}
	if got := readFile(t, ca); got != "CA-2" {
		t.Fatalf("renewed secret not written: %q", got)
	}

	// The token is no longer listed: removed.
	if _, err := x.Apply(ctx, gen(3, "r2", caFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tok); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unlisted file still there: %v", err)
	}

	// A failed generation's new file goes with it on rollback.
	extra := api.HostFile{Path: filepath.Join(root, "extra"), Inline: "x"}
	if _, err := x.Apply(ctx, gen(4, "broken", caFile, extra)); !errors.Is(err, ErrActivate) {
		t.Fatalf("broken generation: %v", err)
	}
	if _, err := os.Stat(extra.Path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("rolled-back generation's file still there: %v", err)
	}
	if readFile(t, ca) != "CA-2" {
		t.Fatal("rollback lost ca.crt")
	}

	// A restarted agent (new writer, same manifest) still removes it.
	hf2 := &HostFiles{Roots: []string{root}, Manifest: hf.Manifest, Secrets: sec}
	res, err := hf2.Sync(ctx, nil)
	if err != nil || len(res.Removed) != 1 || res.Removed[0] != ca {
		t.Fatalf("sync after restart: %+v, %v", res, err)
	}
}

// TestHostFilesRefused: bad paths, modes and references are refused with
// the field, the value and what is accepted, and nothing is written.
func TestHostFilesRefused(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "etc-kubernetes")
	outside := filepath.Join(dir, "outside")
	if err := os.MkdirAll(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	ok := api.HostFile{Path: filepath.Join(root, "ok"), Inline: "x"}
	ref := func(name, key string) *api.SecretKeyRef { return &api.SecretKeyRef{Name: name, Key: key} }
	tests := []struct {
		name string
		f    api.HostFile
		want []string // in the error
	}{
		{"relative", api.HostFile{Path: "etc/kubernetes/x", Inline: "x"}, []string{"hostFiles[1].path", `"etc/kubernetes/x"`, "absolute path under one of " + root}},
		{"dot-dot", api.HostFile{Path: root + "/pki/../../escape", Inline: "x"}, []string{"hostFiles[1].path", `".."`}},
		{"outside", api.HostFile{Path: outside + "/x", Inline: "x"}, []string{"outside the allowed roots", root}},
		{"sibling of a root", api.HostFile{Path: root + "x/ca.crt", Inline: "x"}, []string{"outside the allowed roots"}},
		{"the root itself", api.HostFile{Path: root, Inline: "x"}, []string{"outside the allowed roots"}},
		{"twice", ok, []string{"hostFiles[1].path", "hostFiles[0]", "each path once"}},
		{"inline and secret", api.HostFile{Path: root + "/b", Inline: "x", SecretRef: ref("s", "k")}, []string{"hostFiles[1]", "not both"}},
		{"secret without key", api.HostFile{Path: root + "/b", SecretRef: ref("s", "")}, []string{"hostFiles[1].secretRef", "name and key"}},
		{"mode not octal", api.HostFile{Path: root + "/b", Inline: "x", Mode: "rw-------"}, []string{"hostFiles[1].mode", `"rw-------"`, `"0600"`}},
		{"mode too big", api.HostFile{Path: root + "/b", Inline: "x", Mode: "4755"}, []string{"hostFiles[1].mode", "0777"}},
		{"owner", api.HostFile{Path: root + "/b", Inline: "x", Owner: ":root"}, []string{"hostFiles[1].owner", "user:group"}},
		{"missing secret", api.HostFile{Path: root + "/b", SecretRef: ref("absent", "k")}, []string{"hostFiles[1]", "absent"}},
		{"missing key", api.HostFile{Path: root + "/b", SecretRef: ref("s", "nope")}, []string{"hostFiles[1]", `"nope"`}},
		{"through a link out of the roots", api.HostFile{Path: root + "/link/x", Inline: "x"}, []string{"outside the allowed roots"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hf := &HostFiles{Roots: []string{root}, Secrets: mapSecrets{"s": {"k": []byte("v")}}}
			_, err := hf.Sync(t.Context(), []api.HostFile{ok, tt.f})
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if tt.name == "through a link out of the roots" {
				if _, err := os.Stat(filepath.Join(outside, "x")); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("written through the link: %v", err)
				}
				return
			}
			if _, err := os.Stat(ok.Path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused list wrote its valid file: %v", err)
			}
		})
	}
}

// TestHostFilesUnchangedNotRewritten: a file already right is left alone
// (its inode stays), one whose mode drifted is rewritten.
func TestHostFilesUnchangedNotRewritten(t *testing.T) {
	root := filepath.Join(t.TempDir(), "r")
	hf := &HostFiles{Roots: []string{root}}
	f := api.HostFile{Path: root + "/a", Inline: "x", Mode: "0640"}
	ctx := t.Context()
	if r, err := hf.Sync(ctx, []api.HostFile{f}); err != nil || len(r.Written) != 1 {
		t.Fatalf("first: %+v, %v", r, err)
	}
	if r, err := hf.Sync(ctx, []api.HostFile{f}); err != nil || len(r.Unchanged) != 1 {
		t.Fatalf("second: %+v, %v", r, err)
	}
	if err := os.Chmod(f.Path, 0o666); err != nil {
		t.Fatal(err)
	}
	if r, err := hf.Sync(ctx, []api.HostFile{f}); err != nil || len(r.Written) != 1 || mode(t, f.Path) != 0o640 {
		t.Fatalf("drifted mode: %+v, %v, %v", r, err, mode(t, f.Path))
	}
	// An owner of the agent's own ids is accepted and kept.
	f.Owner = fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	if _, err := hf.Sync(ctx, []api.HostFile{f}); err != nil {
		t.Fatal(err)
	}
}

// TestExecRefusesHostFilesWithoutWriter: an applier with no host-file
// writer refuses a spec that lists some, before its command runs.
func TestExecRefusesHostFilesWithoutWriter(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "ran")
	x, err := NewExec(ExecConfig{Command: []string{"sh", "-c", "touch " + ran}, Gate: fastGate})
	if err != nil {
		t.Fatal(err)
	}
	spec := api.NixosConfigurationSpec{Generation: 1, GitRepo: "g", HostFiles: []api.HostFile{{Path: "/etc/kubernetes/x", Inline: "x"}}}
	if _, err := x.Apply(t.Context(), Generation{Machine: "m", Number: 1, Spec: spec}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "hostFiles") {
		t.Fatalf("apply: %v", err)
	}
	if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the command ran")
	}
}

// TestHostFileRootsAgree: the agent's configuration default is the
// applier's.
func TestHostFileRootsAgree(t *testing.T) {
	if !slices.Equal(config.DefaultHostFileRoots, DefaultHostFileRoots()) {
		t.Fatalf("config %v, apply %v", config.DefaultHostFileRoots, DefaultHostFileRoots())
	}
}
