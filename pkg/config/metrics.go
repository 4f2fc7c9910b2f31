package config

// Default /metrics addresses: on loopback, where no TLS is needed
// (docs/monitoring.md).
const (
	DefaultAgentMetricsListen       = "127.0.0.1:9479"
	DefaultCoordinatorMetricsListen = "127.0.0.1:9480"
)

// Metrics is where a program serves /metrics and /debug/pprof/
// (package metrics). On a loopback address it serves plain HTTP; on any
// other it serves TLS with CertFile/KeyFile and requires a client
// certificate signed by ClientCAFile.
type Metrics struct {
	Listen       string // "metrics.listen": host:port; empty serves nothing
	CertFile     string // "metrics.tls.certFile": the server certificate (PEM)
	KeyFile      string // "metrics.tls.keyFile": its private key (PEM)
	ClientCAFile string // "metrics.tls.clientCAFile": the CA scrapers' client certificates chain to
}

// metricsKeys are the metrics keys; def is the program's default address.
func metricsKeys(m *Metrics, def string) []key {
	return []key{
		stringKey("metrics.listen", &m.Listen, def, "host:port of /metrics and /debug/pprof/; plain HTTP on loopback, TLS with client certificates (metrics.tls.*) anywhere else; empty serves nothing", orEmpty(hostPort)),
		stringKey("metrics.tls.certFile", &m.CertFile, "", "server certificate (PEM) of /metrics when metrics.listen is not loopback", absPath(true)),
		stringKey("metrics.tls.keyFile", &m.KeyFile, "", "private key (PEM) of metrics.tls.certFile", absPath(true)),
		stringKey("metrics.tls.clientCAFile", &m.ClientCAFile, "", "CA certificate (PEM) a scraper's client certificate must chain to when metrics.listen is not loopback, e.g. the cluster CA", absPath(true)),
	}
}

// metricsRule: an address beyond loopback needs the three TLS files.
func metricsRule(m *Metrics) rule {
	return endpointTLS{prefix: "metrics", listen: &m.Listen, certFile: &m.CertFile, keyFile: &m.KeyFile, clientCA: &m.ClientCAFile, example: DefaultAgentMetricsListen, clients: "scrapers'"}.rule()
}

// orEmpty accepts "" besides what check accepts.
func orEmpty(check func(string) error) func(string) error {
	return func(v string) error {
		if v == "" {
			return nil
		}
		return check(v)
	}
}
