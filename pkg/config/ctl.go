package config

import (
	"time"

	"github.com/spf13/pflag"
)

// Output formats of nicoctl.
var ctlOutputs = []string{"table", "json", "yaml"}

// Ctl is the configuration of nicoctl.
type Ctl struct {
	Endpoints []string      // "endpoints": client URLs of the etcd cluster
	Prefix    string        // "store.prefix"
	Timeout   time.Duration // "timeout": how long to wait for an answer
	// DialTimeout ("dialTimeout") bounds connecting to the endpoints (TCP
	// and TLS): a host that never answers fails after it, not Timeout.
	DialTimeout time.Duration
	Output      string  // "output" (-o): table, json or yaml
	TLS         TLS     // nicoctl's client certificate (tls.go), root's by default
	Secrets     Secrets // the store's secrets key (secrets.go), for nicoctl token
}

// CtlFlags registers every key of nicoctl as a flag on fs, plus --config.
// Output also has the shorthand -o.
func CtlFlags(fs *pflag.FlagSet) {
	keys, _ := ctlKeys(new(Ctl))
	addFlags(fs, keys)
}

// LoadCtl loads and validates nicoctl's configuration from fs (already
// parsed; it may be nil), the environment, the config file and the
// defaults.
func LoadCtl(fs *pflag.FlagSet) (Ctl, error) {
	var c Ctl
	keys, rules := ctlKeys(&c)
	if err := load(fs, keys, rules); err != nil {
		return Ctl{}, err
	}
	// nicoctl runs in a shell: relative certificate and key paths mean
	// the working directory's.
	if err := c.TLS.absolute(); err != nil {
		return Ctl{}, err
	}
	if err := c.Secrets.absolute(); err != nil {
		return Ctl{}, err
	}
	return c, nil
}

// ctlKeys is nicoctl's table of keys, bound to the fields of c.
func ctlKeys(c *Ctl) ([]key, []rule) {
	output := stringKey("output", &c.Output, "table", "output format: table, json, yaml", oneOf(ctlOutputs...))
	output.shorthand = "o"
	return append([]key{
		listKey("endpoints", &c.Endpoints, []string{"https://127.0.0.1:2379"}, "https client URLs of the etcd cluster",
			nonEmptyList("list the client URLs of the etcd cluster, e.g. https://10.0.0.1:2379"), each(httpsURL("https://10.0.0.1:2379")), noDuplicates),
		stringKey("store.prefix", &c.Prefix, DefaultPrefix, "nico's keyspace prefix in etcd", storePrefix),
		durationKey("timeout", &c.Timeout, 5*time.Second, "how long to wait for the cluster to answer", positive),
		durationKey("dialTimeout", &c.DialTimeout, 2*time.Second, "how long to wait for a connection (TCP and TLS) to an endpoint before giving up on it; an endpoint that never answers fails after this, not --timeout", between(0, time.Minute, false)),
		output,
	}, append(tlsKeysChecked(&c.TLS, "root", anyPath), secretsKeys(&c.Secrets)...)...), nil
}
