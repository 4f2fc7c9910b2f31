package hypervisor

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzParseOEMStrings feeds the first-boot identity parser the SMBIOS OEM
// strings a guest reads (anyone able to define a domain writes them), one
// per line. Without a name the identity is refused; otherwise it renders
// to OEM strings that parse back to the same identity.
func FuzzParseOEMStrings(f *testing.F) {
	id := Identity{Name: "web-0", Endpoints: []string{"https://10.0.0.1:2379", "https://10.0.0.2:2379"}, Seeds: []string{"10.0.0.1:7946"}, Roles: []string{"worker"}, Token: "abcdef.0123456789abcdef", Prefix: "/nico/v1/"}
	f.Add(strings.Join(id.OEMStrings(), "\n"))
	f.Add(CredentialPrefix + CredName + "=x\n" + CredentialPrefix + CredName + "=y\nother\n" + CredentialPrefix + "novalue")
	f.Add(CredentialPrefix + CredName + "=a=b\n" + CredentialPrefix + CredRoles + "=,\n" + CredentialPrefix + CredEndpoints + "=,,")
	f.Add(CredentialPrefix + CredToken + "=only-a-token")
	f.Fuzz(func(t *testing.T, lines string) {
		creds := ParseOEMStrings(strings.Split(lines, "\n"))
		for k := range creds {
			if strings.Contains(k, "=") {
				t.Fatalf("credential name %q holds '='", k)
			}
		}
		got, err := ParseIdentity(creds)
		if err != nil {
			if creds[CredName] != "" {
				t.Fatalf("identity named %q refused: %v", creds[CredName], err)
			}
			return
		}
		if got.Name == "" {
			t.Fatal("identity without a name accepted")
		}
		back, err := ParseIdentity(ParseOEMStrings(got.OEMStrings()))
		if err != nil {
			t.Fatalf("rendered identity refused: %v", err)
		}
		if !reflect.DeepEqual(got, back) {
			t.Fatalf("round trip changed the identity:\n%+v\n%+v", got, back)
		}
	})
}
