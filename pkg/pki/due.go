package pki

import (
	"bytes"
	"crypto/x509"
	"net"
	"slices"
	"time"
)

// Leaf is one certificate a Renewer keeps valid: where its files live and
// what it must say.
type Leaf struct {
	Name     string // for logs, e.g. "etcd-server"
	CertFile string
	KeyFile  string
	Request  Request
}

// LeafStatus is a leaf as observed on disk: Cert is nil when either file is
// missing, unreadable, or the key does not match the certificate.
type LeafStatus struct {
	Leaf Leaf
	Cert *x509.Certificate
}

// Reason says why a leaf is due.
type Reason string

// Why a leaf is re-issued.
const (
	ReasonMissing  Reason = "missing"      // no usable key pair on disk
	ReasonExpiring Reason = "expiring"     // less than 1/3 of its lifetime left
	ReasonIssuer   Reason = "other issuer" // not signed by the current CA (rotation)
	ReasonChanged  Reason = "changed"      // CN, O, usage or SANs differ from the Request
	// ReasonNotYetValid: its NotBefore is after now (it was issued while
	// the clock was ahead); kept, it would be refused until then.
	ReasonNotYetValid Reason = "not valid yet"
)

// Due is a leaf to re-issue and why.
type Due struct {
	Leaf   Leaf
	Reason Reason
}

// DueLeaves decides which leaves to re-issue at now. It is pure: the caller
// observes the files (Renewer.observe) and applies the answer. issuer is the
// current CA certificate; nil skips the issuer check.
func DueLeaves(issuer *x509.Certificate, leaves []LeafStatus, now time.Time) []Due {
	var due []Due
	for _, l := range leaves {
		if r, ok := dueReason(issuer, l, now); ok {
			due = append(due, Due{Leaf: l.Leaf, Reason: r})
		}
	}
	return due
}

func dueReason(issuer *x509.Certificate, l LeafStatus, now time.Time) (Reason, bool) {
	c := l.Cert
	switch {
	case c == nil:
		return ReasonMissing, true
	case issuer != nil && (!bytes.Equal(c.RawIssuer, issuer.RawSubject) || c.CheckSignatureFrom(issuer) != nil):
		return ReasonIssuer, true
	case !matches(c, l.Leaf.Request):
		return ReasonChanged, true
	case now.Before(c.NotBefore):
		return ReasonNotYetValid, true
	case renewDue(c.NotBefore, c.NotAfter, now):
		return ReasonExpiring, true
	}
	return "", false
}

// matches reports whether c says what req asks.
func matches(c *x509.Certificate, req Request) bool {
	return c.Subject.CommonName == req.CommonName &&
		sameStrings(c.Subject.Organization, req.Organization) &&
		slices.Equal(c.ExtKeyUsage, req.Usage.extKeyUsage()) &&
		sameStrings(c.DNSNames, req.DNSNames) &&
		sameIPs(c.IPAddresses, req.IPs)
}

func sameStrings(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func sameIPs(a, b []net.IP) bool {
	key := func(ips []net.IP) []string {
		out := make([]string, len(ips))
		for i, ip := range ips {
			out[i] = ip.String()
		}
		return out
	}
	return sameStrings(key(a), key(b))
}
