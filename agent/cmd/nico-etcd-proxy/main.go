// Command nico-etcd-proxy runs a Kubernetes cluster's namespacing etcd
// proxy on a control-plane machine (package etcdnsproxy): the
// distribution (k3s's --datastore-endpoint) talks to it on loopback, and
// it forwards every request to nico's etcd with the keys under the
// cluster's namespace, as the cluster's etcd identity. cluster.nix's
// etcd.proxy gives its flags (etcdProxy.args in nico's lib.clusterSchema).
//
// Exit codes: 0 stopped by a signal, 1 failed, 2 bad usage.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/homystack/nico/pkg/etcdnsproxy"
	"github.com/homystack/nico/pkg/logging"
	"github.com/spf13/pflag"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// options are the command's flags.
type options struct {
	files                                  etcdnsproxy.Files
	namespace, endpoints, listen, clientCN string
	level                                  string
}

// flags is the command's flag set, writing into o.
func flags(o *options, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("nico-etcd-proxy", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &o.files
	fs.StringVar(&o.namespace, "namespace", "", "key prefix added to every key, as /clusters/NAME/ (required)")
	fs.StringVar(&o.endpoints, "endpoints", "", "nico's etcd client URLs, comma separated (required)")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:2479", "host:port to serve on (keep it on loopback)")
	fs.StringVar(&o.clientCN, "client-cn", "", "the only Common Name a client certificate may carry (the cluster's etcd user, kubernetes:NAME); empty: any the client CA signed")
	fs.StringVar(&f.EtcdCA, "etcd-cacert", "", "CA bundle of nico's etcd servers (cluster.nix paths.etcdCACert)")
	fs.StringVar(&f.Cert, "cert", "", "the cluster's etcd client certificate (paths.apiserverEtcdClientCert)")
	fs.StringVar(&f.Key, "key", "", "its key (paths.apiserverEtcdClientKey)")
	fs.StringVar(&f.ServingCert, "serving-cert", "", "the proxy's serving certificate, with 127.0.0.1 among its names (paths.apiserverCert)")
	fs.StringVar(&f.ServingKey, "serving-key", "", "its key (paths.apiserverKey)")
	fs.StringVar(&f.ClientCA, "client-cacert", "", "CA a client certificate must chain to (default: --etcd-cacert)")
	fs.StringVar(&o.level, "log-level", "info", "debug, info, warn or error")
	return fs
}

// run runs the proxy until ctx ends and returns the exit code.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	var o options
	if err := flags(&o, stderr).Parse(args); err != nil {
		fmt.Fprintln(stderr, "nico-etcd-proxy:", err)
		return 2
	}
	f := o.files
	if f.ClientCA == "" {
		f.ClientCA = f.EtcdCA
	}
	log, err := logging.New(stderr, o.level, "text")
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	backend, server, err := f.TLS()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	var eps []string
	for _, e := range strings.Split(o.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	p, err := etcdnsproxy.New(etcdnsproxy.Config{Namespace: o.namespace, Endpoints: eps, BackendTLS: backend, ServerTLS: server, ClientCommonName: o.clientCN, Logger: log}, o.listen)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if err := p.Run(ctx); err != nil {
		log.Error("nico-etcd-proxy failed", "err", err)
		return 1
	}
	return 0
}
