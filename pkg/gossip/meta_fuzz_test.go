package gossip

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// FuzzMetaEncode builds a Meta from arbitrary fields, as an agent would from
// its configuration and host. Encode either refuses it with a sentinel, or
// produces at most MaxMetaSize bytes that decode back to the same Meta.
// (FuzzDecodeMeta, in meta_test.go, fuzzes the other direction.)
func FuzzMetaEncode(f *testing.F) {
	f.Add("cp-1", "controlPlane,coordinator", "v0.3.1", "https://10.0.0.1:2379", "42", uint8(HealthOK|HealthEtcd|HealthVoter))
	f.Add("w", "worker", "", "", "", uint8(0))
	f.Add("hv", "hypervisor,pilot", "dev", "", "7", uint8(0xff))
	f.Add(strings.Repeat("n", 300), "", strings.Repeat("v", 300), "", "", uint8(1))
	f.Fuzz(func(t *testing.T, name, roles, version, clientURL, generation string, health uint8) {
		m := Meta{Name: name, Version: version, ClientURL: clientURL, Generation: generation, Health: Health(health)}
		if roles != "" {
			m.Roles = strings.Split(roles, ",")
		}
		b, err := m.Encode()
		if err != nil {
			if !errors.Is(err, ErrMetaInvalid) && !errors.Is(err, ErrMetaTooLarge) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if len(b) > MaxMetaSize {
			t.Fatalf("encoded %d bytes, over MaxMetaSize", len(b))
		}
		got, err := DecodeMeta(b)
		if err != nil {
			t.Fatalf("encoding %x does not decode: %v", b, err)
		}
		// Roles come back once each, in knownRoles order.
		var want []string
		for _, r := range knownRoles {
			if slices.Contains(m.Roles, r) {
				want = append(want, r)
			}
		}
		m.Roles = want
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip: %+v became %+v", m, got)
		}
	})
}
