package etcdtest

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdclient"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Dial returns a client of endpoints that presents a fresh certificate for
// commonName (an etcd user, e.g. pki.CoordinatorIdentity) from PKI(t) when
// they are https; autoSync > 0 keeps its endpoints in sync with the member
// list. Unlike NewClient the caller closes it: tests that crash a client on
// purpose, or check for leaked goroutines before cleanups run.
func Dial(t testing.TB, commonName string, autoSync time.Duration, endpoints ...string) *clientv3.Client {
	t.Helper()
	var tlsCfg *tls.Config
	if anyHTTPS(endpoints) {
		tlsCfg = ClientTLS(t, commonName)
	}
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, AutoSyncInterval: autoSync, TLS: tlsCfg})
	if err != nil {
		t.Fatalf("etcdtest: dial %v: %v", endpoints, err)
	}
	return cli
}
