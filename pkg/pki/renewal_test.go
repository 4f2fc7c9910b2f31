package pki

import (
	"testing"
	"time"
)

func TestNeedsRenewal(t *testing.T) {
	ca := newTestCA(t, "nico-ca")
	// Lifetime is 90m + the 1 minute backdate = 91m; a third is 30m20s.
	certPEM, _, err := ca.Issue(Request{CommonName: "x", Usage: UsageClient, Validity: 90 * time.Minute}, t0)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		at   time.Duration // after t0
		want bool
	}{
		{0, false},
		{59 * time.Minute, false},
		{90*time.Minute - 30*time.Minute - 21*time.Second, false}, // 30m21s left
		{90*time.Minute - 30*time.Minute - 19*time.Second, true},  // 30m19s left
		{89 * time.Minute, true},
		{91 * time.Minute, true},   // expired
		{-2 * time.Minute, true},   // not valid yet: issued while the clock was ahead
		{-30 * time.Second, false}, // within the backdate
	}
	for _, tc := range cases {
		got, err := NeedsRenewal(certPEM, t0.Add(tc.at))
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("at t0+%s: NeedsRenewal = %v, want %v", tc.at, got, tc.want)
		}
	}
}
