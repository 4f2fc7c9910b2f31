package enroll

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/pki"
)

// Renewal of a node certificate, for machines that hold no ca.key
// (workers, hypervisors) and so cannot re-issue it themselves. The node
// proves who it is with the certificate it renews (mutual TLS), not with a
// token:
//
//	node (no ca.key)                          join endpoint
//	────────────────                          ─────────────
//	TLS: pins ca.crt, presents node.crt ───▶  asks for (does not require) a client certificate
//	new key + CSR ─────────────────────────▶  POST /v1/renew {csrPEM}
//	                                          rate limit per source IP → 429
//	                                          client certificate: present? chains to
//	                                          the cluster CA? valid now? CN node:<name>?
//	                                          SignCSR with that CN (the CSR's subject
//	                                          is ignored)
//	                           ◀────────────  {certPEM}
//	checks CN, chain, key; writes node.key then node.crt
//
// A certificate that has expired cannot renew: the node joins again with a
// token (/v1/join).

// PathRenew is where a node renews its certificate.
const PathRenew = "/v1/renew"

// Problem codes of /v1/renew.
const (
	CodeNoClientCert = "no-client-certificate"
	CodeCertExpired  = "client-certificate-expired"
	// CodeCertNotYetValid is answered to a certificate valid only later
	// (a clock is wrong); the client sees ErrClockSkew.
	CodeCertNotYetValid = "client-certificate-not-yet-valid"
	CodeBadClientCert   = "bad-client-certificate"
	CodeNotNode         = "not-a-node-certificate"
	CodeNodeRemoved     = "node-removed"
)

// Errors a renewing node gets.
var (
	// ErrNoClientCert: the endpoint got no client certificate.
	ErrNoClientCert = errors.New("join: renew: no client certificate")
	// ErrCertExpired: the node certificate has expired; the node must
	// join again with a token.
	ErrCertExpired = errors.New("join: renew: node certificate expired")
	// ErrBadClientCert: the client certificate is not from the cluster CA,
	// or not a client certificate.
	ErrBadClientCert = errors.New("join: renew: client certificate not from the cluster CA")
	// ErrNotNode: the client certificate is not a node's (CN node:<name>).
	ErrNotNode = errors.New("join: renew: not a node certificate")
	// ErrNodeRemoved: the node was removed from the cluster; its
	// certificate is not renewed (a machine joins again with a token).
	ErrNodeRemoved = errors.New("join: renew: node removed from the cluster")
)

// RenewRequest is the body of POST /v1/renew.
type RenewRequest struct {
	// CSRPEM is a PEM certificate request for the node's new key; only its
	// key is used.
	CSRPEM string `json:"csrPEM"`
}

// RenewResponse is the answer to POST /v1/renew.
type RenewResponse struct {
	CertPEM string `json:"certPEM"`
}

// DecodeRenewRequest parses and checks a renew request body (outside
// input: unknown fields and a CSR that does not parse or whose signature
// does not verify are refused).
func DecodeRenewRequest(body []byte) (RenewRequest, error) {
	var req RenewRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return RenewRequest{}, fmt.Errorf("body: %v", err)
	}
	if dec.More() {
		return RenewRequest{}, errors.New("body: more than one JSON value")
	}
	if block, _ := pem.Decode([]byte(req.CSRPEM)); block == nil || block.Type != "CERTIFICATE REQUEST" {
		return RenewRequest{}, errors.New("csrPEM: a PEM CERTIFICATE REQUEST is accepted")
	}
	if _, err := pki.ParseCSR([]byte(req.CSRPEM)); err != nil { // its signature too
		return RenewRequest{}, fmt.Errorf("csrPEM: %v", err)
	}
	return req, nil
}

// renew signs a new certificate for the node that presents its current,
// valid certificate.
func (s *Server) renew(w http.ResponseWriter, r *http.Request) {
	source := r.RemoteAddr
	now := s.cfg.Now()
	leaf, name, ok := s.clientNode(w, r, now)
	if !ok {
		return
	}
	if s.cfg.NodeRemoved != nil {
		removed, err := s.cfg.NodeRemoved(r.Context(), name)
		if err != nil {
			s.internal(w, "read the node's state", err)
			return
		}
		if removed {
			s.log.Warn("renewal refused", "node", name, "reason", CodeNodeRemoved, "source", source)
			problem(w, http.StatusForbidden, CodeNodeRemoved, fmt.Sprintf("node %s was removed from the cluster; its certificate is not renewed: delete its node.crt and node.key and join again with a join token", name))
			return
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		problem(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("body unreadable or larger than %d bytes", maxBody))
		return
	}
	req, err := DecodeRenewRequest(body)
	if err != nil {
		s.log.Info("renewal refused", "node", name, "reason", CodeBadRequest, "source", source)
		problem(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	if csr, _ := pki.ParseCSR([]byte(req.CSRPEM)); csr != nil && samePublicKey(csr.PublicKey, leaf.PublicKey) {
		s.log.Info("renewal refused", "node", name, "reason", CodeBadRequest, "source", source)
		problem(w, http.StatusBadRequest, CodeBadRequest, "csrPEM: the request's key is the current certificate's; renew with a new key")
		return
	}
	certPEM, err := s.cfg.Signer.SignCSR([]byte(req.CSRPEM), pki.Request{CommonName: leaf.Subject.CommonName, Usage: pki.UsageClient}, now)
	if err != nil {
		problem(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("certificate request: %v", err))
		return
	}
	attrs := []any{"node", name, "oldSerial", leaf.SerialNumber.Text(16), "oldNotAfter", leaf.NotAfter.UTC(), "source", source}
	if c, err := pki.ParseCert(certPEM); err == nil {
		attrs = append(attrs, "serial", c.SerialNumber.Text(16), "notAfter", c.NotAfter.UTC())
	}
	s.log.Info("node certificate renewed", attrs...)
	writeJSON(w, RenewResponse{CertPEM: string(certPEM)})
}

// clientNode checks the client certificate of r: present, from the
// cluster CA, for client use, valid at now, with the CN of a node. It
// returns the certificate and the node's name, or answers the refusal.
//
// The TLS layer only asks for the certificate (tls.RequestClientCert, so
// that /v1/join clients, which have none, can connect) and checks that the
// client holds its key; the chain and dates are checked here, against
// CAPEM and the server's clock, so that each refusal says what is wrong.
func (s *Server) clientNode(w http.ResponseWriter, r *http.Request, now time.Time) (*x509.Certificate, string, bool) {
	source := r.RemoteAddr
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		s.log.Info("renewal refused", "reason", CodeNoClientCert, "source", source)
		problem(w, http.StatusUnauthorized, CodeNoClientCert, "POST "+PathRenew+" needs the node's current certificate as the TLS client certificate; a machine without one joins with a token ("+PathJoin+")")
		return nil, "", false
	}
	peer := r.TLS.PeerCertificates
	leaf := peer[0]
	desc := fmt.Sprintf("client certificate %q (serial %s)", truncated(leaf.Subject.CommonName), leaf.SerialNumber.Text(16))
	refuse := func(status int, code, msg string) (*x509.Certificate, string, bool) {
		s.log.Info("renewal refused", "cn", truncated(leaf.Subject.CommonName), "serial", leaf.SerialNumber.Text(16), "reason", code, "source", source)
		problem(w, status, code, msg)
		return nil, "", false
	}
	cas, err := pki.ParseCerts(s.cfg.CAPEM)
	if err != nil {
		s.internal(w, "read the cluster CA", err)
		return nil, "", false
	}
	opts := x509.VerifyOptions{Roots: x509.NewCertPool(), Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: now}
	for _, c := range cas {
		opts.Roots.AddCert(c)
	}
	for _, c := range peer[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(opts); err != nil {
		// Tell an expired certificate of the cluster from a foreign one:
		// does it verify at the edge of its validity nearest now?
		opts.CurrentTime = leaf.NotAfter
		if now.Before(leaf.NotBefore) {
			opts.CurrentTime = leaf.NotBefore
		}
		outside := now.Before(leaf.NotBefore) || now.After(leaf.NotAfter)
		if _, err2 := leaf.Verify(opts); outside && err2 == nil {
			if now.Before(leaf.NotBefore) {
				return refuse(http.StatusForbidden, CodeCertNotYetValid, fmt.Sprintf("%s is not valid before %s (endpoint's clock: %s); check the clocks", desc, leaf.NotBefore.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339)))
			}
			return refuse(http.StatusForbidden, CodeCertExpired, fmt.Sprintf("%s expired at %s; an expired certificate cannot be renewed: the node must join again with a token", desc, leaf.NotAfter.UTC().Format(time.RFC3339)))
		}
		return refuse(http.StatusForbidden, CodeBadClientCert, fmt.Sprintf("%s is not a client certificate from this cluster's CA: %v", desc, err))
	}
	name, ok := strings.CutPrefix(leaf.Subject.CommonName, pki.NodeIdentity(""))
	if !ok || !nameRE.MatchString(name) {
		return refuse(http.StatusForbidden, CodeNotNode, fmt.Sprintf("%s is not a node's (CN %s<name>); only node certificates are renewed here", desc, pki.NodeIdentity("")))
	}
	return leaf, name, true
}

// samePublicKey tells whether two public keys are the same key.
func samePublicKey(a, b any) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}
