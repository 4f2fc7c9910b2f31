package config

import (
	"fmt"
	"net"
)

// DefaultStatusPageListen is where the coordinator serves its status page
// unless told otherwise: loopback, plain HTTP (docs/statuspage.md).
const DefaultStatusPageListen = "127.0.0.1:9490"

// StatusPage is where the coordinator serves its read-only status page. On
// a loopback address it serves plain HTTP to anyone on the machine; on any
// other it serves TLS with CertFile/KeyFile and requires a client
// certificate signed by ClientCAFile whose Common Name is a reader
// identity (root, nico-coordinator or nico-viewer).
type StatusPage struct {
	Listen       string // "statusPage.listen": host:port; empty serves nothing
	CertFile     string // "statusPage.tls.certFile": the server certificate (PEM)
	KeyFile      string // "statusPage.tls.keyFile": its private key (PEM)
	ClientCAFile string // "statusPage.tls.clientCAFile": the CA readers' client certificates chain to
}

// statusPageKeys are the status page keys.
func statusPageKeys(s *StatusPage) []key {
	return []key{
		stringKey("statusPage.listen", &s.Listen, DefaultStatusPageListen, "host:port of the read-only status page; plain HTTP on loopback, TLS with client certificates (statusPage.tls.*) anywhere else; empty serves nothing", statusPageAddr),
		stringKey("statusPage.tls.certFile", &s.CertFile, "", "server certificate (PEM) of the status page when statusPage.listen is not loopback", absPath(true)),
		stringKey("statusPage.tls.keyFile", &s.KeyFile, "", "private key (PEM) of statusPage.tls.certFile", absPath(true)),
		stringKey("statusPage.tls.clientCAFile", &s.ClientCAFile, "", "CA certificate (PEM) a reader's client certificate must chain to when statusPage.listen is not loopback, e.g. the cluster CA (<pki>/ca.crt)", absPath(true)),
	}
}

// statusPageAddr accepts host:port or "".
func statusPageAddr(v string) error {
	if v == "" {
		return nil
	}
	return hostPort(v)
}

// statusPageRule: an address beyond loopback needs the three TLS files.
func statusPageRule(s *StatusPage) rule {
	return rule{keys: []string{"statusPage.listen", "statusPage.tls.certFile", "statusPage.tls.keyFile", "statusPage.tls.clientCAFile"}, check: func() error {
		if s.Listen == "" || StatusPageLoopback(s.Listen) {
			return nil
		}
		if s.CertFile == "" || s.KeyFile == "" || s.ClientCAFile == "" {
			return fmt.Errorf("%q is not accepted without statusPage.tls.certFile, statusPage.tls.keyFile and statusPage.tls.clientCAFile; bind to loopback (e.g. %s) or give the server certificate, its key and the CA of the readers' client certificates", s.Listen, DefaultStatusPageListen)
		}
		return nil
	}}
}

// StatusPageLoopback tells whether host:port names a loopback host
// ("localhost" or a loopback IP); an empty host means every address.
func StatusPageLoopback(v string) bool {
	host, _, err := net.SplitHostPort(v)
	if err != nil || host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
