package pki

import (
	"errors"
	"testing"
)

func TestBundle(t *testing.T) {
	oldCA, newCA := newTestCA(t, "old-ca"), newTestCA(t, "new-ca")
	leafPEM, _, err := oldCA.Issue(Request{CommonName: "x", Usage: UsageClient}, t0)
	if err != nil {
		t.Fatal(err)
	}
	subjects := func(pemBytes []byte) []string {
		t.Helper()
		certs, err := ParseCerts(pemBytes)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range certs {
			out = append(out, c.Subject.CommonName)
		}
		return out
	}
	staged, err := AppendCA(oldCA.CertPEM, newCA.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	if got := subjects(staged); len(got) != 2 || got[0] != "old-ca" || got[1] != "new-ca" {
		t.Fatalf("staged bundle %v, want [old-ca new-ca]", got)
	}
	again, err := AppendCA(staged, newCA.CertPEM)
	if err != nil || len(subjects(again)) != 2 {
		t.Fatalf("appending a present CA: %v, %v; want no duplicate", subjects(again), err)
	}
	fromEmpty, err := AppendCA(nil, oldCA.CertPEM)
	if err != nil || len(subjects(fromEmpty)) != 1 {
		t.Fatalf("append to an empty bundle: %v", err)
	}
	finished, err := RemoveCA(staged, oldCA.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	if got := subjects(finished); len(got) != 1 || got[0] != "new-ca" {
		t.Fatalf("finished bundle %v, want [new-ca]", got)
	}
	if _, err := RemoveCA(finished, newCA.CertPEM); !errors.Is(err, ErrBadRequest) {
		t.Errorf("removing the last CA: %v, want ErrBadRequest", err)
	}
	if _, err := AppendCA(oldCA.CertPEM, leafPEM); !errors.Is(err, ErrBadRequest) {
		t.Errorf("appending a leaf: %v, want ErrBadRequest", err)
	}
	if _, err := AppendCA([]byte("junk"), newCA.CertPEM); !errors.Is(err, ErrBadPEM) {
		t.Errorf("bad bundle: %v, want ErrBadPEM", err)
	}
}
