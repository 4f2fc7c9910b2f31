package config

import (
	"fmt"

	"github.com/homystack/nico/pkg/httpserve"
)

// endpointTLS is what an HTTP endpoint's settings hold (metrics.*,
// statusPage.*): where it listens and the TLS files it needs beyond
// loopback (httpserve's rule).
type endpointTLS struct {
	prefix                              string // "metrics"
	listen, certFile, keyFile, clientCA *string
	example                             string // a loopback address to suggest
	clients                             string // who presents client certificates ("scrapers'")
}

// rule: an address beyond loopback needs the three TLS files.
func (e endpointTLS) rule() rule {
	p := e.prefix
	return rule{keys: []string{p + ".listen", p + ".tls.certFile", p + ".tls.keyFile", p + ".tls.clientCAFile"}, check: func() error {
		if *e.listen == "" || httpserve.Loopback(*e.listen) {
			return nil
		}
		if *e.certFile == "" || *e.keyFile == "" || *e.clientCA == "" {
			return fmt.Errorf("%q is not accepted without %s.tls.certFile, %s.tls.keyFile and %s.tls.clientCAFile; bind to loopback (e.g. %s) or give the server certificate, its key and the CA of the %s client certificates", *e.listen, p, p, p, e.example, e.clients)
		}
		return nil
	}}
}
