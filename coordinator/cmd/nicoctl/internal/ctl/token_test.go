package ctl

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/token"
)

func TestToken(t *testing.T) {
	c := etcdtest.Start(t, 1)
	eps := c.Endpoints()
	keyFile := filepath.Join(t.TempDir(), "secrets.key")
	k, _ := secretbox.NewKey()
	if err := os.WriteFile(keyFile, k, 0o600); err != nil {
		t.Fatal(err)
	}
	tk := func(args ...string) result {
		return run(t, eps, append([]string{"--secrets.keyFile", keyFile}, args...)...)
	}

	r := tk("token", "create", "--description", "rack 4")
	r.want(t, 0, nil, []string{"allows worker", "expires", "shown once"})
	worker, err := token.Parse(r.stdout)
	if err != nil || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("create printed %q: %v", r.stdout, err)
	}
	r = tk("token", "create", "--roles", "controlPlane,worker", "--ttl", "0")
	r.want(t, 0, nil, []string{"allows controlPlane,worker and never expires"})
	cp, _ := token.Parse(r.stdout)

	// Listing never shows a secret unless asked.
	for _, args := range [][]string{{"token", "list"}, {"token", "list", "-o", "json"}, {"token", "list", "-o", "yaml"}} {
		r = tk(args...)
		r.want(t, 0, []string{worker.ID, cp.ID}, nil)
		if strings.Contains(r.stdout, worker.Secret) || strings.Contains(r.stdout, cp.Secret) {
			t.Fatalf("%v shows a secret:\n%s", args, r.stdout)
		}
	}
	r = tk("token", "list")
	r.want(t, 0, []string{"rack 4", "active", "never", "controlPlane,worker"}, nil)
	r = tk("token", "list", "--show-secrets")
	r.want(t, 0, []string{worker.Reveal(), cp.Reveal(), "TOKEN"}, nil)
	r = tk("token", "list", "--show-secrets", "-o", "json")
	var out []tokenOut
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out) != 2 {
		t.Fatalf("json: %v %s", err, r.stdout)
	}
	for _, o := range out {
		if o.Token != worker.Reveal() && o.Token != cp.Reveal() {
			t.Fatalf("json token %+v", o)
		}
	}

	// Revoke, by id or by the whole token (which is not echoed).
	tk("token", "revoke", worker.ID).want(t, 0, []string{"token " + worker.ID + " revoked"}, nil)
	r = tk("token", "revoke", cp.Reveal())
	r.want(t, 0, []string{"token " + cp.ID + " revoked"}, nil)
	if strings.Contains(r.stdout+r.stderr, cp.Secret) {
		t.Fatal("revoke echoed the secret")
	}
	tk("token", "list").want(t, 0, []string{"revoked"}, nil)
	tk("token", "revoke", "nope00").want(t, 4, nil, []string{"no token nope00"})

	// Bad usage and an unusable key.
	tk("token", "create", "--roles", "king").want(t, 2, nil, []string{`--roles "king" is not accepted`})
	tk("token", "create", "--ttl", "-1h").want(t, 2, nil, []string{"--ttl"})
	tk("token").want(t, 2, nil, []string{"create, list or revoke"})
	run(t, eps, "--secrets.keyFile", filepath.Join(t.TempDir(), "none"), "token", "list").want(t, 2, nil, []string{"secrets.keyFile", "control-plane machine"})
	if err := os.Chmod(keyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	tk("token", "list").want(t, 2, nil, []string{"chmod 600"})
}

// TestTokenRelativeKeyFile: --secrets.keyFile takes a path relative to
// the working directory, like the certificate paths.
func TestTokenRelativeKeyFile(t *testing.T) {
	c := etcdtest.Start(t, 1)
	dir := t.TempDir()
	k, _ := secretbox.NewKey()
	if err := os.WriteFile(filepath.Join(dir, "secrets.key"), k, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	r := run(t, c.Endpoints(), "--secrets.keyFile", "secrets.key", "token", "create")
	r.want(t, ExitOK, nil, []string{"shown once"})
	run(t, c.Endpoints(), "--secrets.keyFile", "./secrets.key", "token", "list").want(t, ExitOK, []string{"active"}, nil)
}
