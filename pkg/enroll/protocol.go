// Package enroll is a new machine's enrollment with a join token: the
// join endpoint that control-plane agents serve and the client a new
// machine uses to get its certificate with nothing but the token
// (docs/security.md). It is not the etcd membership join, which the
// agent's bring-up follows through a join request (api.JoinRequest) once
// the machine holds its certificates:
//
//	client                                    server (control-plane agent)
//	──────                                    ────────────────────────────
//	TLS, server not yet verified ──────────▶  GET /v1/discovery?id=<id>
//	                              ◀─────────  {caPEM, proof: HMAC(secret, CA DER)}
//	proof verifies and the TLS leaf chains
//	to the CA? pin it : ErrCAProofMismatch
//	new key + CSR, body signed ────────────▶  POST /v1/join, X-Nico-Proof: HMAC(secret, body)
//	                                          rate limit per source IP → 429
//	                                          token known, proof, clock skew,
//	                                          nonce not seen, token.Check,
//	                                          SignCSR, EnsureIdentity
//	                              ◀─────────  {certPEM, caPEM, endpoints, gossip,
//	                                           [control-plane bundle]}
//
// The token's secret never crosses the wire: each side proves it knows it
// with an HMAC-SHA256 keyed by it.
package enroll

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// DefaultPort is where control-plane agents serve the join endpoint.
const DefaultPort = 7950

// Paths and the proof header.
const (
	PathDiscovery = "/v1/discovery"
	PathJoin      = "/v1/join"
	ProofHeader   = "X-Nico-Proof"
)

// MaxSkew is how far a join request's time may be from the server's clock.
const MaxSkew = 5 * time.Minute

// maxBody bounds a join request's body.
const maxBody = 64 << 10

// Discovery is the answer to GET /v1/discovery: the cluster CA and the
// server's proof that it knows the token's secret.
type Discovery struct {
	CAPEM string `json:"caPEM"`
	// Proof is hex HMAC-SHA256(secret, DER of the CA certificate).
	Proof string `json:"proof"`
}

// Request is the body of POST /v1/join; ProofHeader carries
// hex HMAC-SHA256(secret, body).
type Request struct {
	TokenID string     `json:"tokenID"`
	Name    string     `json:"name"`
	Roles   []api.Role `json:"roles"`
	CSRPEM  string     `json:"csrPEM"`
	// Nonce (random, hex) and Time make a captured request useless later.
	Nonce string    `json:"nonce"`
	Time  time.Time `json:"time"`
}

// Response is what a joining machine gets: its certificate and what it
// needs to find and talk to the cluster.
type Response struct {
	CertPEM   string   `json:"certPEM"`
	CAPEM     string   `json:"caPEM"`
	Endpoints []string `json:"endpoints,omitempty"`
	// GossipSecret is what the mesh's keys derive from, and GossipGeneration
	// the generation they are at.
	GossipSecret     []byte `json:"gossipSecret,omitempty"`
	GossipGeneration uint64 `json:"gossipGeneration"`
	// ControlPlane is sent only to a machine whose token allows the
	// control-plane role.
	ControlPlane *Bundle `json:"controlPlane,omitempty"`
}

// Bundle is what a control-plane machine holds beyond a node's
// certificate: the CA's key, the store's secrets key, and the coordinator
// and root client identities.
type Bundle struct {
	CAKeyPEM           string `json:"caKeyPEM"`
	SecretsKey         []byte `json:"secretsKey"`
	CoordinatorCertPEM string `json:"coordinatorCertPEM,omitempty"`
	CoordinatorKeyPEM  string `json:"coordinatorKeyPEM,omitempty"`
	RootCertPEM        string `json:"rootCertPEM,omitempty"`
	RootKeyPEM         string `json:"rootKeyPEM,omitempty"`
}

// Problem is the body of every refusal.
type Problem struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Problem codes.
const (
	CodeUnknown        = "unknown-token"
	CodeExpired        = "expired-token"
	CodeRevoked        = "revoked-token"
	CodeRoleNotAllowed = "role-not-allowed"
	CodeRateLimited    = "rate-limited"
	CodeBadProof       = "bad-proof"
	CodeReplayed       = "replayed"
	CodeClockSkew      = "clock-skew"
	CodeBadRequest     = "bad-request"
	CodeNameInUse      = "name-in-use"
	CodeInternal       = "internal"
)

// Errors a joining machine gets (besides token.ErrUnknown, ErrExpired,
// ErrRevoked and ErrRoleNotAllowed).
var (
	// ErrCAProofMismatch: the endpoint could not prove it knows the
	// token's secret, or its certificate is not from the CA it sent.
	ErrCAProofMismatch = errors.New("join: CA proof mismatch (possible man in the middle)")
	ErrRateLimited     = errors.New("join: rate limited")
	ErrBadProof        = errors.New("join: the request's proof does not match the token")
	ErrReplayed        = errors.New("join: request replayed")
	ErrClockSkew       = errors.New("join: clock skew")
	ErrBadRequest      = errors.New("join: bad request")
	ErrNameInUse       = errors.New("join: node name in use (a live node has it)")
	ErrServer          = errors.New("join: the join endpoint failed")
	ErrUnreachable     = errors.New("join: no join endpoint reachable")
)

// mac is HMAC-SHA256(secret, data), hex.
func mac(secret string, data []byte) string {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// macEqual compares a received hex MAC with the expected one in constant
// time.
func macEqual(secret string, data []byte, got string) bool {
	want, _ := hex.DecodeString(mac(secret, data))
	g, err := hex.DecodeString(got)
	return err == nil && hmac.Equal(want, g)
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
