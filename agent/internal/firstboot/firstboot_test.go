package firstboot

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/hypervisor"
)

// type11 encodes strs as a raw SMBIOS type 11 structure, as the kernel
// exposes it.
func type11(strs ...string) []byte {
	b := []byte{11, 5, 0x20, 0x00, byte(len(strs))}
	for _, s := range strs {
		b = append(b, s...)
		b = append(b, 0)
	}
	return append(b, 0)
}

func TestReadFromSMBIOS(t *testing.T) {
	id := hypervisor.Identity{Name: "web-0", Endpoints: []string{"http://10.0.0.1:2379"}, Seeds: []string{"10.0.0.1:7946"}, Roles: []string{"worker"}, Token: "s3cret", Prefix: "/nico/v1/"}
	dmi := t.TempDir()
	for name, raw := range map[string][]byte{"11-0": type11(append([]string{"vendor-thing"}, id.OEMStrings()...)...), "1-0": {1, 4, 0, 0, 0, 0}} {
		if err := os.MkdirAll(filepath.Join(dmi, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dmi, name, "raw"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Read("", dmi)
	if err != nil || !reflect.DeepEqual(got, id) {
		t.Fatalf("Read = %+v, %v", got, err)
	}
	if env := Env(got); env["NICO_NAME"] != "web-0" || env["NICO_ETCD_ENDPOINTS"] != "http://10.0.0.1:2379" || env["NICO_ROLES"] != "worker" || env["NICO_GOSSIP_SEEDS"] != "10.0.0.1:7946" {
		t.Fatalf("env %v", env)
	}
	for k, v := range Env(got) {
		if strings.Contains(v, "s3cret") {
			t.Fatalf("token in the environment: %s", k)
		}
	}
	dir := filepath.Join(t.TempDir(), "run")
	p, err := TokenFile(got, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if fi, _ := os.Stat(p); err != nil || strings.TrimSpace(string(b)) != "s3cret" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file %s: %q %v", p, b, err)
	}
}

func TestCredentialsComeFirst(t *testing.T) {
	creds := t.TempDir()
	for k, v := range map[string]string{"nico.name": "vm-9\n", "nico.endpoints": "http://a:2379,http://b:2379", "nico.token": "tok\n", "nico.seeds": "a,b:7946"} {
		if err := os.WriteFile(filepath.Join(creds, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Read(creds, t.TempDir())
	if err != nil || got.Name != "vm-9" || len(got.Endpoints) != 2 || len(got.Seeds) != 2 || got.Token != "tok" {
		t.Fatalf("Read = %+v, %v", got, err)
	}
	// systemd's credential file is the token file; nothing is written.
	if p, err := TokenFile(got, creds, "/nonexistent"); err != nil || p != filepath.Join(creds, "nico.token") {
		t.Fatalf("TokenFile = %q, %v", p, err)
	}
}

func TestNoIdentity(t *testing.T) {
	if _, err := Read(t.TempDir(), t.TempDir()); !errors.Is(err, ErrNone) {
		t.Fatalf("err %v, want ErrNone", err)
	}
	for _, bad := range [][]byte{{11, 5, 0, 0, 2, 'a', 0}, {12, 5, 0, 0, 0}, {11, 40, 0, 0, 0}} {
		if _, err := ParseType11(bad); err == nil {
			t.Errorf("ParseType11(%v) accepted", bad)
		}
	}
}
