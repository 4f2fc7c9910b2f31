package enroll

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/token"
)

// FuzzDecodeRequest feeds DecodeRequest the body of POST /v1/join, which
// anyone who reaches the endpoint sends before any proof is checked. A body
// is either refused with an error, or a request that passes every check
// (a token id, a DNS-label name, roles a token may allow, a nonce of 16 to 128
// characters, a parseable CSR) and whose encoding decodes to the same
// request.
func FuzzDecodeRequest(f *testing.F) {
	csr, _, err := pki.NewCSR(pki.NodeIdentity("w1"))
	if err != nil {
		f.Fatal(err)
	}
	good := Request{TokenID: "abcdef", Name: "w1", Roles: []api.Role{api.RoleWorker}, CSRPEM: string(csr), Nonce: "0123456789abcdef0123", Time: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	b, err := json.Marshal(good)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	cp := good
	cp.Roles, cp.Name = []api.Role{api.RoleControlPlane, api.RoleWorker}, "cp-2"
	b, _ = json.Marshal(cp)
	f.Add(b)
	f.Add([]byte(`{"tokenID":"abcdef","name":"W_1","roles":["worker"],"csrPEM":"x","nonce":"short"}`))
	f.Add([]byte(`{"tokenID":"abcdef","name":"w1","roles":["hypervisor"],"nonce":"0123456789abcdef","extra":1}`))
	f.Add([]byte(`{"tokenID":"abcdef"} {"tokenID":"abcdef"}`))
	f.Add([]byte(`{"time":"2026-02-30T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRequest(body)
		if err != nil {
			if !reflect.DeepEqual(req, Request{}) {
				t.Fatalf("error %v with a request %+v", err, req)
			}
			return
		}
		if !token.ValidID(req.TokenID) || !nameRE.MatchString(req.Name) || len(req.Roles) == 0 || len(req.Nonce) < 16 || len(req.Nonce) > 128 {
			t.Fatalf("accepted %+v", req)
		}
		for _, r := range req.Roles {
			if !slices.Contains(token.AllRoles, r) {
				t.Fatalf("accepted role %q", r)
			}
		}
		if _, err := pki.ParseCSR([]byte(req.CSRPEM)); err != nil {
			t.Fatalf("accepted a CSR that pki cannot parse: %v", err)
		}
		enc, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("accepted request does not encode: %v", err)
		}
		back, err := DecodeRequest(enc)
		if err != nil {
			t.Fatalf("re-encoding %s refused: %v", enc, err)
		}
		if !back.Time.Equal(req.Time) {
			t.Fatalf("time %v became %v", req.Time, back.Time)
		}
		back.Time, req.Time = time.Time{}, time.Time{}
		if !reflect.DeepEqual(back, req) {
			t.Fatalf("round trip:\n%+v\n%+v", req, back)
		}
	})
}
