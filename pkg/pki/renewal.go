package pki

import (
	"fmt"
	"time"
)

// NeedsRenewal reports whether the certificate (the first of certPEM) has
// less than a third of its lifetime left at now, has expired, or is not
// valid yet (issued while the clock was ahead).
func NeedsRenewal(certPEM []byte, now time.Time) (bool, error) {
	c, err := ParseCert(certPEM)
	if err != nil {
		return false, fmt.Errorf("pki: needs renewal: %w", err)
	}
	return now.Before(c.NotBefore) || renewDue(c.NotBefore, c.NotAfter, now), nil
}

// renewDue is the rule: renew when less than 1/3 of [notBefore, notAfter]
// is left.
func renewDue(notBefore, notAfter, now time.Time) bool {
	lifetime := notAfter.Sub(notBefore)
	left := notAfter.Sub(now)
	return left*3 < lifetime
}
