package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/homystack/nico/pkg/config"
)

// TestGuestMesh: a hypervisor host hands its VMs its own gossip address and
// its seeds with the token; without a mesh, nothing (VMs get endpoints).
func TestGuestMesh(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var cfg config.Agent
	cfg.TokenFile = tok
	cfg.Gossip.Bind, cfg.Gossip.Port, cfg.Gossip.Advertise = "0.0.0.0", "7946", "10.77.0.1"
	cfg.Gossip.Seeds = []string{"cp-1:7946"}
	if seeds, token := guestMesh(cfg); !slices.Equal(seeds, []string{"10.77.0.1:7946", "cp-1:7946"}) || token != "s3cret" {
		t.Fatalf("seeds %v token %q", seeds, token)
	}
	cfg.Gossip.Advertise = ""
	if seeds, _ := guestMesh(cfg); !slices.Equal(seeds, []string{"cp-1:7946"}) {
		t.Fatalf("seeds %v with bind 0.0.0.0 and no advertise", seeds)
	}
	guest := filepath.Join(t.TempDir(), "guest-token")
	if err := os.WriteFile(guest, []byte("abc123.worker-only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Hypervisor.GuestTokenFile = guest
	if _, token := guestMesh(cfg); token != "abc123.worker-only" {
		t.Fatalf("guest token %q, want hypervisor.guestTokenFile's", token)
	}
	if seeds, token := guestMesh(config.Agent{}); seeds != nil || token != "" {
		t.Fatalf("no mesh: seeds %v token %q", seeds, token)
	}
}
