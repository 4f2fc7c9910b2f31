package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/testwait"
)

// TestRunServesTheStatusPage: nico-coordinator serves the status page on
// statusPage.listen, naming itself as the leader once it leads, and stops
// serving on SIGTERM.
func TestRunServesTheStatusPage(t *testing.T) {
	cl := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: true})
	id := etcdtest.IssueFiles(t, filepath.Join(t.TempDir(), "pki"), pki.Request{CommonName: pki.CoordinatorIdentity, Usage: pki.UsageClient})
	addr := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	var out logging.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"--name", "c-1", "--etcd.endpoints", cl.Endpoints()[0], "--statusPage.listen", addr,
			"--tls.caFile", id.CA, "--tls.certFile", id.Cert, "--tls.keyFile", id.Key}, &out)
	}()
	client := &http.Client{Timeout: 5 * time.Second}
	testwait.For(t, 30*time.Second, "the status page names c-1 as leader", func() (bool, string) {
		resp, err := client.Get("http://" + addr + "/")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 200 && strings.Contains(string(body), `data-name="c-1"`), resp.Status
	})
	stopCoordinator(t, code, &out)
	if _, err := client.Get("http://" + addr + "/"); err == nil {
		t.Error("the status page is still served after the coordinator stopped")
	}
}

// TestStatusPageBeyondLoopbackNeedsTLS: an address other than loopback
// without the TLS files exits 2 naming them; so do TLS files that do not
// load.
func TestStatusPageBeyondLoopbackNeedsTLS(t *testing.T) {
	var out bytes.Buffer
	if c := run([]string{"--name", "c-1", "--etcd.endpoints", "https://127.0.0.1:2379", "--statusPage.listen", ":9490"}, &out); c != 2 {
		t.Fatalf("exit %d, want 2:\n%s", c, out.String())
	}
	if !strings.Contains(out.String(), "statusPage.tls.certFile") {
		t.Errorf("output does not name statusPage.tls.certFile:\n%s", out.String())
	}

	cl := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: true})
	id := etcdtest.IssueFiles(t, filepath.Join(t.TempDir(), "pki"), pki.Request{CommonName: pki.CoordinatorIdentity, Usage: pki.UsageClient})
	missing := filepath.Join(t.TempDir(), "none.crt")
	out.Reset()
	if c := run([]string{"--name", "c-1", "--etcd.endpoints", cl.Endpoints()[0],
		"--tls.caFile", id.CA, "--tls.certFile", id.Cert, "--tls.keyFile", id.Key,
		"--statusPage.listen", fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t)),
		"--statusPage.tls.certFile", missing, "--statusPage.tls.keyFile", missing, "--statusPage.tls.clientCAFile", id.CA}, &out); c != 2 {
		t.Fatalf("exit %d with TLS files that do not load, want 2:\n%s", c, out.String())
	}
	if !strings.Contains(out.String(), "statusPage.tls") {
		t.Errorf("output does not name statusPage.tls:\n%s", out.String())
	}
}
