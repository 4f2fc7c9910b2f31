package kubetest_test

import (
	"crypto/tls"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/pki"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func itoa(n int) string { return strconv.Itoa(n) }

// dialTLS is a client of endpoints with tlsCfg's identity, closed when the
// test ends.
func dialTLS(t *testing.T, endpoints []string, tlsCfg *tls.Config) *clientv3.Client {
	t.Helper()
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, TLS: tlsCfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// getStatus GETs url trusting caFile, presenting certs (none: anonymous),
// and returns the status code.
func getStatus(t *testing.T, url, caFile string, certs []tls.Certificate) int {
	t.Helper()
	pool, err := pki.LoadPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs, MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func hostFile(path, content string) api.HostFile { return api.HostFile{Path: path, Inline: content} }
