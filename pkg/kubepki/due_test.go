package kubepki_test

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/pki"
)

func mustKeyPEM(t *testing.T, ca *pki.CA) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock("PRIVATE KEY", der)
}

// TestDue is the renewal rule on a table: pure, at a fixed clock.
func TestDue(t *testing.T) {
	ca, _ := pki.NewCA("ca", 0, t0)
	other, _ := pki.NewCA("other", 0, t0)
	req := pki.Request{CommonName: "kubernetes:demo", Usage: pki.UsageClient, Validity: kubepki.LeafValidity}
	leaf := kubepki.Leaf{Secret: "demo-apiserver-etcd-client", Issuer: "demo-ca", Request: req}
	kcLeaf := kubepki.Leaf{Secret: "demo-kubeconfig", Issuer: "demo-ca", Request: req, Kubeconfig: true, Server: "https://a:6443"}
	pair := func(by *pki.CA, r pki.Request) map[string][]byte {
		crt, key, err := by.Issue(r, t0)
		if err != nil {
			t.Fatal(err)
		}
		return map[string][]byte{kubepki.KeyCert: crt, kubepki.KeyKey: key}
	}
	kubeconfig := func(server string) map[string][]byte {
		p := pair(ca, req)
		b, err := kubepki.Kubeconfig("demo", server, "admin", ca.CertPEM, p[kubepki.KeyCert], p[kubepki.KeyKey])
		if err != nil {
			t.Fatal(err)
		}
		return map[string][]byte{kubepki.KeyValue: b}
	}
	mismatched := pair(ca, req)
	mismatched[kubepki.KeyKey] = pair(ca, req)[kubepki.KeyKey]
	renamed := req
	renamed.CommonName = "kubernetes:other"
	regrouped := req
	regrouped.Organization = []string{"system:masters"}
	day := 24 * time.Hour
	cases := []struct {
		name    string
		leaf    kubepki.Leaf
		data    map[string][]byte // nil: no secret
		issuers map[string]*pki.CA
		at      time.Duration
		want    pki.Reason // "" = not due
	}{
		{"fresh", leaf, pair(ca, req), nil, day, ""},
		{"missing", leaf, nil, nil, 0, pki.ReasonMissing},
		{"key does not match", leaf, mismatched, nil, 0, pki.ReasonMissing},
		{"not a certificate", leaf, map[string][]byte{kubepki.KeyCert: []byte("x"), kubepki.KeyKey: []byte("y")}, nil, 0, pki.ReasonMissing},
		{"just under two thirds used", leaf, pair(ca, req), nil, 4*day + 15*time.Hour + 59*time.Minute, ""},
		{"two thirds used", leaf, pair(ca, req), nil, 4*day + 16*time.Hour, pki.ReasonExpiring},
		{"expired", leaf, pair(ca, req), nil, 8 * day, pki.ReasonExpiring},
		{"signed by another CA", leaf, pair(other, req), nil, day, pki.ReasonIssuer},
		{"CN changed", leaf, pair(ca, renamed), nil, day, pki.ReasonChanged},
		{"groups changed", leaf, pair(ca, regrouped), nil, day, pki.ReasonChanged},
		{"issuer unknown: cannot issue", leaf, nil, map[string]*pki.CA{}, 0, ""},
		{"kubeconfig fresh", kcLeaf, kubeconfig("https://a:6443"), nil, day, ""},
		{"kubeconfig server moved", kcLeaf, kubeconfig("https://b:6443"), nil, day, pki.ReasonChanged},
		{"kubeconfig expiring", kcLeaf, kubeconfig("https://a:6443"), nil, 6 * day, pki.ReasonExpiring},
		{"kubeconfig unreadable", kcLeaf, map[string][]byte{kubepki.KeyValue: []byte("{")}, nil, day, pki.ReasonMissing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			have := map[string]*api.Secret{}
			if tc.data != nil {
				s := api.NewSecret(tc.leaf.Secret)
				s.Spec.Data = tc.data
				have[tc.leaf.Secret] = s
			}
			iss := tc.issuers
			if iss == nil {
				iss = map[string]*pki.CA{"demo-ca": ca}
			}
			certs := map[string]*x509.Certificate{}
			for n, c := range iss {
				certs[n] = c.Cert
			}
			got := kubepki.Due([]kubepki.Leaf{tc.leaf}, have, certs, t0.Add(tc.at))
			switch {
			case tc.want == "" && len(got) != 0:
				t.Fatalf("due: %+v, want not due", got)
			case tc.want != "" && (len(got) != 1 || got[0].Reason != tc.want):
				t.Fatalf("due: %+v, want %s", got, tc.want)
			}
		})
	}
}
