package ctl

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
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

// probe connects to every endpoint at once (TCP, then TLS for an https
// one), each within dialTimeout: when none of them answers, nicoctl fails
// now, naming them, rather than wait its whole --timeout; when every one
// refuses at once, the error says so. An endpoint that connects, or fails
// any other way (a certificate etcd's client will report), is left to the
// etcd client.
func probe(ctx context.Context, endpoints []string, tlsCfg *tls.Config, dialTimeout time.Duration) error {
	errs := make([]error, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" {
			return nil
		}
		wg.Go(func() { errs[i] = dial(ctx, u, tlsCfg, dialTimeout) })
	}
	wg.Wait()
	var refused, silent []string
	for i, err := range errs {
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.ECONNREFUSED):
			refused = append(refused, endpoints[i])
		default:
			silent = append(silent, endpoints[i])
		}
	}
	if len(silent) == 0 {
		return fmt.Errorf("%w at %s: is etcd running there? (--endpoints, NICO_ENDPOINTS)", syscall.ECONNREFUSED, strings.Join(refused, ", "))
	}
	also := ""
	if len(refused) > 0 {
		also = fmt.Sprintf(" (and %s at %s)", syscall.ECONNREFUSED, strings.Join(refused, ", "))
	}
	return fmt.Errorf("%w within %s (--dialTimeout, NICO_DIALTIMEOUT) to %s%s: is the host up and etcd listening there? (--endpoints, NICO_ENDPOINTS; raise --dialTimeout for a slow link)", errNoConnection, dialTimeout, strings.Join(silent, ", "), also)
}

// errNoConnection: no endpoint could be connected to within the dial
// timeout.
var errNoConnection = errors.New("no connection")

// dial connects to u's host and, for https, completes a TLS handshake, all
// within timeout. It returns nil for a connection, a refusal wrapping
// ECONNREFUSED, errTimedOut for no answer in time, and nil for any other
// failure: that one is the etcd client's to report.
func dial(ctx context.Context, u *url.URL, tlsCfg *tls.Config, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return answerOf(ctx, err)
	}
	defer conn.Close()
	if u.Scheme != "https" || tlsCfg == nil {
		return nil
	}
	c := tlsCfg.Clone()
	if c.ServerName == "" {
		c.ServerName = u.Hostname()
	}
	return answerOf(ctx, tls.Client(conn, c).HandshakeContext(ctx))
}

// errTimedOut: an endpoint gave no answer within the dial timeout.
var errTimedOut = errors.New("no answer")

// answerOf classifies a dial's or a handshake's err under ctx (see dial).
func answerOf(ctx context.Context, err error) error {
	var ne net.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ECONNREFUSED):
		return err
	case ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%w: %w", errTimedOut, err)
	default:
		return nil
	}
}
