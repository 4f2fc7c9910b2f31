package hypervisor

import (
	"fmt"
	"sort"
	"strings"
)

// CredentialPrefix starts an SMBIOS OEM string that systemd (v252 and
// later) imports as a credential: io.systemd.credential:NAME=VALUE.
const CredentialPrefix = "io.systemd.credential:"

// Credential names of nico's first-boot identity.
const (
	CredName      = "nico.name"
	CredEndpoints = "nico.endpoints"
	CredSeeds     = "nico.seeds"
	CredRoles     = "nico.roles"
	CredToken     = "nico.token"
	CredPrefix    = "nico.prefix"
)

// Identity is what a new machine is told at first boot, without a network
// round trip: its name, where the cluster is (etcd endpoints, or gossip
// seeds to learn them from with the token), and what it is.
type Identity struct {
	Name      string
	Endpoints []string
	Seeds     []string
	Roles     []string
	Token     string
	Prefix    string
}

// Credentials returns the identity as systemd credentials by name.
func (i Identity) Credentials() map[string]string {
	c := map[string]string{CredName: i.Name}
	if len(i.Endpoints) > 0 {
		c[CredEndpoints] = strings.Join(i.Endpoints, ",")
	}
	if len(i.Seeds) > 0 {
		c[CredSeeds] = strings.Join(i.Seeds, ",")
	}
	if len(i.Roles) > 0 {
		c[CredRoles] = strings.Join(i.Roles, ",")
	}
	if i.Token != "" {
		c[CredToken] = i.Token
	}
	if i.Prefix != "" {
		c[CredPrefix] = i.Prefix
	}
	return c
}

// OEMStrings returns the identity as SMBIOS type 11 strings, sorted.
func (i Identity) OEMStrings() []string {
	var out []string
	for k, v := range i.Credentials() {
		out = append(out, CredentialPrefix+k+"="+v)
	}
	sort.Strings(out)
	return out
}

// ParseIdentity reads an identity back from credentials by name (as found
// in $CREDENTIALS_DIRECTORY or in SMBIOS OEM strings).
func ParseIdentity(creds map[string]string) (Identity, error) {
	id := Identity{Name: creds[CredName], Token: creds[CredToken], Prefix: creds[CredPrefix]}
	if id.Name == "" {
		return id, fmt.Errorf("hypervisor: identity: credential %s is missing", CredName)
	}
	if v := creds[CredEndpoints]; v != "" {
		id.Endpoints = strings.Split(v, ",")
	}
	if v := creds[CredSeeds]; v != "" {
		id.Seeds = strings.Split(v, ",")
	}
	if v := creds[CredRoles]; v != "" {
		id.Roles = strings.Split(v, ",")
	}
	return id, nil
}

// ParseOEMStrings picks the credentials out of SMBIOS OEM strings; other
// strings are ignored.
func ParseOEMStrings(strs []string) map[string]string {
	out := map[string]string{}
	for _, s := range strs {
		rest, ok := strings.CutPrefix(s, CredentialPrefix)
		if !ok {
			continue
		}
		if k, v, ok := strings.Cut(rest, "="); ok {
			out[k] = v
		}
	}
	return out
}
