package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/enroll"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
)

// TestJoinFirst: a machine joins before anything starts only when it is not
// the bootstrap one, has no ca.crt, and its tokenFile holds a join token
// (older clusters keep any text there, for gossip keys only).
func TestJoinFirst(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	joinTok := write("join-token", "abc123.0123456789abcdef\n")
	plain := write("plain", "some gossip text")
	base := config.Agent{Name: "w-1", Roles: []string{config.RoleWorker}, PKI: config.PKI{Dir: filepath.Join(dir, "pki")},
		JoinEndpoint: config.JoinEndpoint{Endpoints: []string{"127.0.0.1:1"}}}
	log := logging.Test(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()

	for name, mod := range map[string]func(*config.Agent){
		"no token file":      func(c *config.Agent) {},
		"not a join token":   func(c *config.Agent) { c.TokenFile = plain },
		"bootstrap machine":  func(c *config.Agent) { c.TokenFile, c.Bootstrap = joinTok, true },
		"missing token file": func(c *config.Agent) { c.TokenFile = filepath.Join(dir, "none") },
	} {
		c := base
		mod(&c)
		if err := joinFirst(ctx, c, log); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if name != "bootstrap machine" && obtainCerts(c, log) != nil {
			t.Errorf("%s: an ObtainCerts hook without a join token", name)
		}
	}
	// With a join token and no ca.crt it tries (here: no endpoint answers
	// until ctx ends).
	c := base
	c.TokenFile = joinTok
	if err := joinFirst(ctx, c, log); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("join with no endpoint up: %v", err)
	}
	// Once it has ca.crt it does not join again.
	if err := pki.WriteFile(pki.Dir(c.PKI.Dir).CACert(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := joinFirst(context.Background(), c, log); err != nil {
		t.Fatal(err)
	}
	// A worker serves no join endpoint.
	serveJoin(context.Background(), c, nil, nil, log)()
}

func TestRateLimit(t *testing.T) {
	if r := rateLimit(0, 0); r != enroll.DefaultRateLimit {
		t.Fatalf("zeros: %+v", r)
	}
	if r := rateLimit(5, 0); r.Burst != 5 || r.Every != enroll.DefaultRateLimit.Every {
		t.Fatalf("burst only: %+v", r)
	}
	if r := rateLimit(0, 3*time.Second); r.Burst != enroll.DefaultRateLimit.Burst || r.Every != 3*time.Second {
		t.Fatalf("interval only: %+v", r)
	}
}
