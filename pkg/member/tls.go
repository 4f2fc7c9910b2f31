package member

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"strconv"

	"github.com/homystack/nico/pkg/pki"
	"go.etcd.io/etcd/client/pkg/v3/transport"
)

// TLS is a member's certificate files (docs/security.md, "Files"). With it
// the member serves https on its client and peer URLs; etcd reads each key
// pair on every handshake, so a pair renewed on disk (pki.Renewer) is used
// without a restart. The trusted CA file is read once, at start.
type TLS struct {
	// TrustedCAFile is the CA (or bundle, during CA rotation) that client
	// and peer certificates must chain to. Required.
	TrustedCAFile string
	// ServerCertFile and ServerKeyFile are presented on the client URL
	// (CN etcd:<name>, server usage, SANs covering the client URL's host).
	ServerCertFile, ServerKeyFile string
	// PeerCertFile and PeerKeyFile are presented to and by peers (client and
	// server usage, SANs covering the peer URL's host: etcd checks a peer's
	// client certificate against its address).
	PeerCertFile, PeerKeyFile string
	// ClientCertAuth requires clients to present a certificate from the CA
	// (--client-cert-auth); its CN is the etcd user once auth is enabled.
	ClientCertAuth bool
	// PeerClientCertAuth requires the same of peers (--peer-client-cert-auth).
	PeerClientCertAuth bool
	// ClientCertFile and ClientKeyFile are the identity of the runtime's own
	// readiness client (Exec, Systemd). Empty: the peer pair, which has
	// client usage.
	ClientCertFile, ClientKeyFile string
}

func (t *TLS) validate() error {
	req := []struct{ field, v string }{
		{"TrustedCAFile", t.TrustedCAFile},
		{"ServerCertFile", t.ServerCertFile}, {"ServerKeyFile", t.ServerKeyFile},
		{"PeerCertFile", t.PeerCertFile}, {"PeerKeyFile", t.PeerKeyFile},
	}
	for _, r := range req {
		if r.v == "" {
			return fmt.Errorf("member: Config.TLS.%s is empty, want a PEM file path", r.field)
		}
	}
	if (t.ClientCertFile == "") != (t.ClientKeyFile == "") {
		return fmt.Errorf("member: Config.TLS.ClientCertFile %q and ClientKeyFile %q: want both or neither", t.ClientCertFile, t.ClientKeyFile)
	}
	return nil
}

// clientPair is the readiness client's key pair.
func (t *TLS) clientPair() (cert, key string) {
	if t.ClientCertFile != "" {
		return t.ClientCertFile, t.ClientKeyFile
	}
	return t.PeerCertFile, t.PeerKeyFile
}

// checkScheme makes a URL's scheme agree with whether TLS is configured.
func checkScheme(field string, u *url.URL, t *TLS) error {
	switch {
	case t != nil && u.Scheme != "https":
		return fmt.Errorf("member: Config.%s is %q but Config.TLS is set, want an https URL", field, u.String())
	case t == nil && u.Scheme != "http":
		return fmt.Errorf("member: Config.%s is %q but Config.TLS is nil, want an http URL (or set Config.TLS)", field, u.String())
	}
	return nil
}

// clientTLS is the tls.Config of the runtime's readiness client; nil for a
// plaintext member.
func (cfg Config) clientTLS() (*tls.Config, error) {
	if cfg.TLS == nil {
		return nil, nil
	}
	cert, key := cfg.TLS.clientPair()
	c, err := pki.ClientTLS(cfg.TLS.TrustedCAFile, cert, key)
	if err != nil {
		return nil, fmt.Errorf("member: readiness client: %w", err)
	}
	return c, nil
}

// tlsInfos are the embed.Config TLS settings for the client and peer URLs.
func (t *TLS) tlsInfos() (client, peer transport.TLSInfo) {
	client = transport.TLSInfo{
		CertFile:       t.ServerCertFile,
		KeyFile:        t.ServerKeyFile,
		TrustedCAFile:  t.TrustedCAFile,
		ClientCertAuth: t.ClientCertAuth,
	}
	peer = transport.TLSInfo{
		CertFile:       t.PeerCertFile,
		KeyFile:        t.PeerKeyFile,
		TrustedCAFile:  t.TrustedCAFile,
		ClientCertAuth: t.PeerClientCertAuth,
	}
	return client, peer
}

// flags are the etcd command-line flags for t.
func (t *TLS) flags() []string {
	return []string{
		"--cert-file=" + t.ServerCertFile,
		"--key-file=" + t.ServerKeyFile,
		"--trusted-ca-file=" + t.TrustedCAFile,
		"--client-cert-auth=" + strconv.FormatBool(t.ClientCertAuth),
		"--peer-cert-file=" + t.PeerCertFile,
		"--peer-key-file=" + t.PeerKeyFile,
		"--peer-trusted-ca-file=" + t.TrustedCAFile,
		"--peer-client-cert-auth=" + strconv.FormatBool(t.PeerClientCertAuth),
	}
}

// env is t as etcd environment variables (the Systemd runtime's file).
func (t *TLS) env() map[string]string {
	return map[string]string{
		"ETCD_CERT_FILE":             t.ServerCertFile,
		"ETCD_KEY_FILE":              t.ServerKeyFile,
		"ETCD_TRUSTED_CA_FILE":       t.TrustedCAFile,
		"ETCD_CLIENT_CERT_AUTH":      strconv.FormatBool(t.ClientCertAuth),
		"ETCD_PEER_CERT_FILE":        t.PeerCertFile,
		"ETCD_PEER_KEY_FILE":         t.PeerKeyFile,
		"ETCD_PEER_TRUSTED_CA_FILE":  t.TrustedCAFile,
		"ETCD_PEER_CLIENT_CERT_AUTH": strconv.FormatBool(t.PeerClientCertAuth),
	}
}

// tlsEnvKeys is the order in which the environment file lists t.env().
var tlsEnvKeys = []string{
	"ETCD_CERT_FILE", "ETCD_KEY_FILE", "ETCD_TRUSTED_CA_FILE", "ETCD_CLIENT_CERT_AUTH",
	"ETCD_PEER_CERT_FILE", "ETCD_PEER_KEY_FILE", "ETCD_PEER_TRUSTED_CA_FILE", "ETCD_PEER_CLIENT_CERT_AUTH",
}
