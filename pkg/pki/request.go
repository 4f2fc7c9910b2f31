package pki

import (
	"fmt"
	"net"
	"time"
)

// Request is what a leaf certificate says: its identity (CN), its usages and
// its subject alternative names.
type Request struct {
	CommonName string
	// Organization is the subject's O (Kubernetes reads it as the user's
	// groups, e.g. system:masters); empty for nico's own identities.
	Organization []string
	Usage        Usage
	DNSNames     []string
	IPs          []net.IP
	Validity     time.Duration // 0 = DefaultValidity (1 year)
}

func (r Request) validate() error {
	if r.CommonName == "" {
		return fmt.Errorf("%w: common name is empty", ErrBadRequest)
	}
	if r.Usage == 0 || r.Usage&^UsagePeer != 0 {
		return fmt.Errorf("%w: %q: usage %d, want client, server or peer", ErrBadRequest, r.CommonName, r.Usage)
	}
	if r.Validity < 0 {
		return fmt.Errorf("%w: %q: validity %s, want >= 0", ErrBadRequest, r.CommonName, r.Validity)
	}
	return nil
}
