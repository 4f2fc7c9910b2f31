package pki

import (
	"net"
	"testing"
	"time"
)

func TestDueLeaves(t *testing.T) {
	ca := newTestCA(t, "nico-ca")
	other := newTestCA(t, "other-ca")
	req := Request{CommonName: MemberIdentity("m1"), Usage: UsagePeer, DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Validity: 90 * time.Minute}
	leafBy := func(ca *CA, r Request) LeafStatus {
		certPEM, _, err := ca.Issue(r, t0)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := ParseCert(certPEM)
		return LeafStatus{Leaf: Leaf{Name: "etcd-peer", Request: req}, Cert: c}
	}
	with := func(f func(*Request)) Request { r := req; f(&r); return r }
	cases := []struct {
		name   string
		issuer *CA
		leaf   LeafStatus
		at     time.Duration
		want   Reason // "" = not due
	}{
		{"fresh", ca, leafBy(ca, req), time.Minute, ""},
		{"missing", ca, LeafStatus{Leaf: Leaf{Name: "x", Request: req}}, 0, ReasonMissing},
		{"two thirds used", ca, leafBy(ca, req), 61 * time.Minute, ReasonExpiring},
		{"expired", ca, leafBy(ca, req), 2 * time.Hour, ReasonExpiring},
		{"other CA", ca, leafBy(other, req), time.Minute, ReasonIssuer},
		{"other CA, issuer check off", nil, leafBy(other, req), time.Minute, ""},
		{"CN changed", ca, leafBy(ca, with(func(r *Request) { r.CommonName = "etcd:m2" })), time.Minute, ReasonChanged},
		{"usage changed", ca, leafBy(ca, with(func(r *Request) { r.Usage = UsageServer })), time.Minute, ReasonChanged},
		{"DNS SAN changed", ca, leafBy(ca, with(func(r *Request) { r.DNSNames = nil })), time.Minute, ReasonChanged},
		{"IP SAN changed", ca, leafBy(ca, with(func(r *Request) { r.IPs = []net.IP{net.IPv4(10, 0, 0, 1)} })), time.Minute, ReasonChanged},
		{"SAN order does not matter", ca, leafBy(ca, with(func(r *Request) { r.DNSNames = []string{"localhost"} })), time.Minute, ""},
		{"validity is not compared", ca, leafBy(ca, with(func(r *Request) { r.Validity = 0 })), time.Minute, ""},
		// Issued while the clock was ahead: once it is back, the leaf is
		// not valid yet for anyone; re-issued, not kept until then.
		{"not valid yet", ca, leafBy(ca, req), -2 * time.Minute, ReasonNotYetValid},
		{"within the backdate", ca, leafBy(ca, req), -30 * time.Second, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var issuer = ca.Cert
			if tc.issuer == nil {
				issuer = nil
			}
			due := DueLeaves(issuer, []LeafStatus{tc.leaf}, t0.Add(tc.at))
			var got Reason
			if len(due) == 1 {
				got = due[0].Reason
			} else if len(due) > 1 {
				t.Fatalf("%d leaves due, want at most 1", len(due))
			}
			if got != tc.want {
				t.Errorf("reason %q, want %q", got, tc.want)
			}
		})
	}
}
