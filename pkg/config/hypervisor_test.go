package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"
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

// TestHypervisorDomainType: auto by default; kvm and qemu accepted; any
// other value refused naming the key, the value and what is accepted.
func TestHypervisorDomainType(t *testing.T) {
	base := []string{"--name=hv-1", "--etcd.endpoints=" + endpoint, "--roles=hypervisor"}
	a, err := loadAgent(t, input{args: base})
	if err != nil || a.Hypervisor.DomainType != "auto" || a.Hypervisor.BootTimeout != 5*time.Minute {
		t.Fatalf("defaults %+v %v", a.Hypervisor, err)
	}
	for _, v := range []string{"kvm", "qemu", "auto"} {
		if a, err := loadAgent(t, input{args: append(base, "--hypervisor.domainType="+v)}); err != nil || a.Hypervisor.DomainType != v {
			t.Fatalf("%s: %+v %v", v, a.Hypervisor, err)
		}
	}
	_, err = loadAgent(t, input{args: append(base, "--hypervisor.domainType=KVM")})
	wantErr(t, err, "hypervisor.domainType", `"KVM"`, "auto, kvm, qemu")
	_, err = loadAgent(t, input{args: append(base, "--hypervisor.bootTimeout=1s")})
	wantErr(t, err, "hypervisor.bootTimeout", "1s", "10s")
}
