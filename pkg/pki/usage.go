package pki

import (
	"crypto/x509"
	"strings"
)

// Usage says what a leaf certificate may be used for; it is a bitset.
type Usage uint8

// The usages a leaf may have.
const (
	// UsageClient: TLS client authentication (agents, coordinators, nicoctl).
	UsageClient Usage = 1 << iota
	// UsageServer: TLS server authentication (etcd client URLs, join endpoint).
	UsageServer
	// UsagePeer is both: etcd peers dial each other and serve each other.
	UsagePeer = UsageClient | UsageServer
)

// extKeyUsage is the x509 extended key usage list for u.
func (u Usage) extKeyUsage() []x509.ExtKeyUsage {
	var out []x509.ExtKeyUsage
	if u&UsageServer != 0 {
		out = append(out, x509.ExtKeyUsageServerAuth)
	}
	if u&UsageClient != 0 {
		out = append(out, x509.ExtKeyUsageClientAuth)
	}
	return out
}

// String names the usage, e.g. "client+server".
func (u Usage) String() string {
	var parts []string
	if u&UsageClient != 0 {
		parts = append(parts, "client")
	}
	if u&UsageServer != 0 {
		parts = append(parts, "server")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}
