package config

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
		stringKey("statusPage.listen", &s.Listen, DefaultStatusPageListen, "host:port of the read-only status page; plain HTTP on loopback, TLS with client certificates (statusPage.tls.*) anywhere else; empty serves nothing", orEmpty(hostPort)),
		stringKey("statusPage.tls.certFile", &s.CertFile, "", "server certificate (PEM) of the status page when statusPage.listen is not loopback", absPath(true)),
		stringKey("statusPage.tls.keyFile", &s.KeyFile, "", "private key (PEM) of statusPage.tls.certFile", absPath(true)),
		stringKey("statusPage.tls.clientCAFile", &s.ClientCAFile, "", "CA certificate (PEM) a reader's client certificate must chain to when statusPage.listen is not loopback, e.g. the cluster CA (<pki>/ca.crt)", absPath(true)),
	}
}

// statusPageRule: an address beyond loopback needs the three TLS files.
func statusPageRule(s *StatusPage) rule {
	return endpointTLS{prefix: "statusPage", listen: &s.Listen, certFile: &s.CertFile, keyFile: &s.KeyFile, clientCA: &s.ClientCAFile, example: DefaultStatusPageListen, clients: "readers'"}.rule()
}
