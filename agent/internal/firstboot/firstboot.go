// Package firstboot reads the identity a hypervisor host hands a new VM at
// boot, without a network round trip: systemd credentials named nico.*
// (from SMBIOS OEM strings io.systemd.credential:NAME=VALUE, imported by
// systemd into $CREDENTIALS_DIRECTORY), or, where systemd did not run (an
// initramfs), the SMBIOS type 11 (OEM strings) tables themselves.
package firstboot

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/homystack/nico/pkg/hypervisor"
)

// ErrNone means no first-boot identity was found.
var ErrNone = errors.New("firstboot: no identity")

// DMIEntries is where Linux exposes the raw SMBIOS tables.
const DMIEntries = "/sys/firmware/dmi/entries"

// Read returns the identity from the credentials in credDir (skipped when
// empty) or else from the SMBIOS type 11 tables under dmiDir.
func Read(credDir, dmiDir string) (hypervisor.Identity, error) {
	if credDir != "" {
		creds := map[string]string{}
		for _, name := range []string{hypervisor.CredName, hypervisor.CredEndpoints, hypervisor.CredSeeds, hypervisor.CredRoles, hypervisor.CredToken, hypervisor.CredPrefix} {
			b, err := os.ReadFile(filepath.Join(credDir, name))
			if err == nil {
				creds[name] = strings.TrimSpace(string(b))
			}
		}
		if creds[hypervisor.CredName] != "" {
			return hypervisor.ParseIdentity(creds)
		}
	}
	strs, err := OEMStrings(dmiDir)
	if err != nil {
		return hypervisor.Identity{}, err
	}
	creds := hypervisor.ParseOEMStrings(strs)
	if creds[hypervisor.CredName] == "" {
		return hypervisor.Identity{}, ErrNone
	}
	return hypervisor.ParseIdentity(creds)
}

// OEMStrings reads the strings of every SMBIOS type 11 structure under dir
// (entries named 11-N, each with a raw file).
func OEMStrings(dir string) ([]string, error) {
	raws, err := filepath.Glob(filepath.Join(dir, "11-*", "raw"))
	if err != nil {
		return nil, err
	}
	if len(raws) == 0 {
		return nil, ErrNone
	}
	var out []string
	for _, p := range raws {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("firstboot: %w", err)
		}
		strs, err := ParseType11(b)
		if err != nil {
			return nil, fmt.Errorf("firstboot: %s: %w", p, err)
		}
		out = append(out, strs...)
	}
	return out, nil
}

// ParseType11 decodes one raw SMBIOS OEM Strings structure: a formatted
// area (type 11, its length, a handle, the count of strings) followed by
// the strings, each ended by NUL, the set ended by another NUL.
func ParseType11(b []byte) ([]string, error) {
	if len(b) < 5 || b[0] != 11 {
		return nil, errors.New("not an SMBIOS type 11 structure")
	}
	length, count := int(b[1]), int(b[4])
	if length < 5 || length > len(b) {
		return nil, fmt.Errorf("formatted length %d out of range", length)
	}
	rest := b[length:]
	var out []string
	for i := 0; i < count; i++ {
		end := bytes.IndexByte(rest, 0)
		if end < 0 {
			return nil, fmt.Errorf("string %d of %d is not terminated", i+1, count)
		}
		out = append(out, string(rest[:end]))
		rest = rest[end+1:]
	}
	return out, nil
}

// TokenFile returns a file holding the identity's token, for the agent's
// tokenFile: the credential itself when systemd imported it into credDir,
// else a file dir/token written with mode 0600 (dir made 0700). It returns
// "" when the identity has no token.
func TokenFile(id hypervisor.Identity, credDir, dir string) (string, error) {
	if id.Token == "" {
		return "", nil
	}
	if credDir != "" {
		p := filepath.Join(credDir, hypervisor.CredToken)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("firstboot: token: %w", err)
	}
	p := filepath.Join(dir, "token")
	if err := os.WriteFile(p, []byte(id.Token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("firstboot: token: %w", err)
	}
	return p, nil
}

// Env returns the agent's NICO_* settings that an identity gives (the
// token goes through TokenFile, never the environment).
func Env(id hypervisor.Identity) map[string]string {
	env := map[string]string{"NICO_NAME": id.Name}
	if len(id.Endpoints) > 0 {
		env["NICO_ETCD_ENDPOINTS"] = strings.Join(id.Endpoints, ",")
	}
	if len(id.Seeds) > 0 {
		env["NICO_GOSSIP_SEEDS"] = strings.Join(id.Seeds, ",")
	}
	if len(id.Roles) > 0 {
		env["NICO_ROLES"] = strings.Join(id.Roles, ",")
	}
	if id.Prefix != "" {
		env["NICO_STORE_PREFIX"] = id.Prefix
	}
	return env
}
