package config

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHypervisorGuestTokenFile: the token for VMs is a readable, non-empty
// file, named by its key when it is not.
func TestHypervisorGuestTokenFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "guest-token")
	if err := os.WriteFile(f, []byte("abc123.s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--name=hv-1", "--etcd.endpoints=" + endpoint, "--roles=hypervisor"}
	a, err := loadAgent(t, input{args: append(base, "--hypervisor.guestTokenFile="+f)})
	if err != nil || a.Hypervisor.GuestTokenFile != f {
		t.Fatalf("%+v %v", a.Hypervisor, err)
	}
	_, err = loadAgent(t, input{args: append(base, "--hypervisor.guestTokenFile=/nonexistent/token")})
	wantErr(t, err, "hypervisor.guestTokenFile", "/nonexistent/token")
}
