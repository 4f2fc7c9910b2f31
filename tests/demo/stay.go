package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/pki"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// copyClientCerts copies the root client certificate, its key and the CA
// from cp-1's pki.dir to <dir>/nicoctl, so nicoctl keeps working after the
// demo removes cp-1 (a removed node wipes its data, pki.dir included).
func (d *demo) copyClientCerts() error {
	p := d.pkiDir(1)
	dst := filepath.Join(d.dir, "nicoctl")
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	var args []string
	for _, f := range []struct{ flag, src, name string }{
		{"--tls.caFile", p.CACert(), "ca.crt"},
		{"--tls.certFile", p.Cert(pki.RootLeaf), "root.crt"},
		{"--tls.keyFile", p.Key(pki.RootLeaf), "root.key"},
	} {
		b, err := os.ReadFile(f.src)
		if err != nil {
			return fmt.Errorf("demo: copying nicoctl's certificates: %w", err)
		}
		to := filepath.Join(dst, f.name)
		if err := os.WriteFile(to, b, 0o600); err != nil {
			return fmt.Errorf("demo: copying nicoctl's certificates: %w", err)
		}
		args = append(args, f.flag, to)
	}
	d.ctlTLS = args
	return nil
}

// stay leaves the cluster running until ctx ends (Ctrl-C or SIGTERM),
// printing how to reach it with nicoctl and how to stop it.
func (d *demo) stay(ctx context.Context, cli *clientv3.Client) {
	var eps []string
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if resp, err := cli.MemberList(cctx); err == nil {
		for _, m := range resp.Members {
			eps = append(eps, m.ClientURLs...)
		}
	}
	cancel()
	if len(eps) == 0 {
		eps = d.allClientURLs()
	}
	bin, _ := filepath.Abs(filepath.Join(d.bin, "nicoctl"))
	step("the cluster keeps running (KEEP=1)")
	say("reach it with nicoctl (any subcommand in place of 'status'):\n\n  %s status --endpoints %s %s\n",
		bin, strings.Join(eps, ","), strings.Join(d.ctlTLS, " "))
	say("logs and data are in %s", d.dir)
	say("stop it with Ctrl-C here, or: kill %d  (every process stops and %s is removed)", os.Getpid(), d.dir)
	<-ctx.Done()
	say("\nstopping the cluster")
}
