package ctl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// whatToPass is how to point nicoctl at a cluster, for errors that say
// none was found.
const whatToPass = `pass the cluster's client URLs and nicoctl's certificate:
  --endpoints https://HOST:2379 --tls.caFile ca.crt --tls.certFile root.crt --tls.keyFile root.key
or set NICO_ENDPOINTS, NICO_TLS_CAFILE, NICO_TLS_CERTFILE, NICO_TLS_KEYFILE,
or the keys endpoints, tls.caFile, tls.certFile, tls.keyFile in a config file (--config or NICO_CONFIG)`

// checkIdentity fails at once, saying what to pass instead, when the
// certificate files are missing: there is no cluster on this machine, or
// nicoctl was not told where its files are.
func (a *app) checkIdentity() error {
	if !slices.ContainsFunc(a.cfg.Endpoints, func(ep string) bool { return strings.HasPrefix(ep, "https://") }) {
		return nil // plain etcd, as in tests: no certificate needed
	}
	var missing []string
	for _, f := range []struct{ key, path string }{
		{"tls.caFile", a.cfg.TLS.CAFile}, {"tls.certFile", a.cfg.TLS.CertFile}, {"tls.keyFile", a.cfg.TLS.KeyFile},
	} {
		if _, err := os.Stat(f.path); errors.Is(err, os.ErrNotExist) {
			missing = append(missing, fmt.Sprintf("%s %s", f.key, f.path))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return withCode(ExitUsage, fmt.Errorf("no nico cluster found: %s do not exist; %s", strings.Join(missing, ", "), whatToPass))
}

// probe dials every endpoint's TCP port once: when each of them refuses the
// connection at once, nicoctl fails now rather than wait its whole timeout.
// Any other outcome (an answer, a timeout) is left to the etcd client.
func probe(ctx context.Context, endpoints []string) error {
	var refused []string
	for _, ep := range endpoints {
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" {
			return nil
		}
		// A port that refuses answers at once; a slow host is the etcd
		// client's to wait for, within --timeout.
		d := net.Dialer{Timeout: time.Second}
		conn, err := d.DialContext(ctx, "tcp", u.Host)
		if err == nil {
			conn.Close()
			return nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil
		}
		refused = append(refused, ep)
	}
	return fmt.Errorf("%w at %s: is etcd running there? (--endpoints, NICO_ENDPOINTS)", syscall.ECONNREFUSED, strings.Join(refused, ", "))
}
