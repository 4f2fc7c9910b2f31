package recovery

import (
	"crypto/tls"
	"fmt"
	"log/slog"

	"github.com/homystack/nico/pkg/httpserve"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
)

// Endpoint is the HTTPS endpoint that serves s at listen, always over TLS
// (loopback too) with the member's server certificate from pki.dir d,
// requiring a client certificate of the fleet CA (d's ca.crt).
func Endpoint(listen string, d pki.Dir, s *Server, log *slog.Logger) (*httpserve.Endpoint, error) {
	cfg, err := pki.ServerTLS(d.CACert(), d.Cert(pki.EtcdServerLeaf), d.Key(pki.EtcdServerLeaf), true)
	if err != nil {
		return nil, fmt.Errorf("recovery: %w", err)
	}
	return &httpserve.Endpoint{Name: "recovery API", Listen: listen, TLS: cfg, TLSOnLoopback: true, Handler: s.Handler(), Log: log}, nil
}

// HostTLS are a control-plane host's member certificates and its root
// client identity, both from pki.dir d.
func HostTLS(d pki.Dir) (*member.TLS, *tls.Config, error) {
	mt := &member.TLS{
		TrustedCAFile:  d.CACert(),
		ServerCertFile: d.Cert(pki.EtcdServerLeaf), ServerKeyFile: d.Key(pki.EtcdServerLeaf),
		PeerCertFile: d.Cert(pki.EtcdPeerLeaf), PeerKeyFile: d.Key(pki.EtcdPeerLeaf),
		ClientCertAuth: true, PeerClientCertAuth: true,
		ClientCertFile: d.Cert(pki.RootLeaf), ClientKeyFile: d.Key(pki.RootLeaf),
	}
	ct, err := pki.ClientTLS(d.CACert(), d.Cert(pki.RootLeaf), d.Key(pki.RootLeaf))
	if err != nil {
		return nil, nil, fmt.Errorf("recovery: the host's root identity: %w", err)
	}
	return mt, ct, nil
}
