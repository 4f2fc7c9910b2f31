package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/token"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The demo runs as a fleet does: cp-1 bootstraps, making the cluster CA in
// its pki.dir and turning the token file into the first join token; every
// other agent holds only that token and gets its certificates (and, as a
// control-plane machine, the CA key) from cp-1's join endpoint. etcd,
// coordinators and nicoctl all speak mutual TLS.

// writeToken makes the join token the agents share.
func (d *demo) writeToken() error {
	t, err := token.Generate()
	if err != nil {
		return err
	}
	d.token = filepath.Join(d.dir, "token")
	return os.WriteFile(d.token, []byte(t.Reveal()+"\n"), 0o600)
}

// pkiDir is node i's pki.dir (the agent's default, <dataDir>/pki).
func (d *demo) pkiDir(i int) pki.Dir { return pki.Dir(filepath.Join(d.dir, nodeName(i), "pki")) }

// tlsArgs are the tls.* flags of a coordinator or nicoctl presenting leaf
// ("coordinator", "root") from node i's pki.dir.
func (d *demo) tlsArgs(i int, leaf string) []string {
	p := d.pkiDir(i)
	return []string{"--tls.caFile", p.CACert(), "--tls.certFile", p.Cert(leaf), "--tls.keyFile", p.Key(leaf)}
}

// waitCert waits until node i's agent has issued leaf.
func waitCert(ctx context.Context, p pki.Dir, leaf string) error {
	for {
		if _, err := os.Stat(p.Cert(leaf)); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no %s certificate in %s: %w", leaf, p, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// client is the demo's own etcd client, as root from cp-1's pki.dir.
func (d *demo) client(ctx context.Context) (*clientv3.Client, error) {
	p := d.pkiDir(1)
	if err := waitCert(ctx, p, pki.RootLeaf); err != nil {
		return nil, err
	}
	tlsCfg, err := etcdclient.Files{CA: p.CACert(), Cert: p.Cert(pki.RootLeaf), Key: p.Key(pki.RootLeaf)}.Load(d.allClientURLs())
	if err != nil {
		return nil, err
	}
	return etcdclient.New(etcdclient.Config{Endpoints: d.allClientURLs(), DialTimeout: 2 * time.Second, TLS: tlsCfg})
}
