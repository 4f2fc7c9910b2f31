package statuspage

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// serve runs srv (Listen set by the caller) until the test ends and
// returns its address.
func serve(t *testing.T, srv *Server) string {
	t.Helper()
	if err := srv.Bind(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return srv.Addr()
}

// stream reads server-sent "update" events and sends each one's data.
func stream(t *testing.T, ctx context.Context, client *http.Client, url string) <-chan string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET %s: %s %q", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	out := make(chan string, 64)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			case line == "" && data != nil:
				out <- strings.Join(data, "\n")
				data = nil
			}
		}
	}()
	return out
}

// next waits for an event containing want, counting the ones before it.
func next(t *testing.T, events <-chan string, want string) int {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for n := 1; ; n++ {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("event stream ended before one with %q", want)
			}
			if strings.Contains(ev, want) {
				return n
			}
		case <-deadline:
			t.Fatalf("no event with %q within 15s", want)
		}
	}
}

// TestEventsFollowTheStore: the stream sends the current fragment at
// once, then a new one after a store change, and a burst of writes is
// coalesced into far fewer updates than writes.
func TestEventsFollowTheStore(t *testing.T) {
	_, st := newStore(t, 1)
	hub := &Hub{Store: st, Debounce: 300 * time.Millisecond}
	addr := serve(t, &Server{Listen: "127.0.0.1:0", Hub: hub})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := stream(t, ctx, http.DefaultClient, "http://"+addr+"/events")
	next(t, events, `no nodes registered`)
	put(t, st, node("cp-1", api.MemberVoter))
	next(t, events, `id="node-cp-1"`)
	const burst = 20
	for i := range burst {
		put(t, st, node(fmt.Sprintf("b-%02d", i), api.MemberVoter))
	}
	if n := next(t, events, fmt.Sprintf(`id="node-b-%02d"`, burst-1)); n > burst/4 {
		t.Errorf("%d writes gave %d updates, want them coalesced (at most %d)", burst, n, burst/4)
	}
	cancel()
	for range events { // the stream's reader ends
	}
}

// TestCounts: heartbeats and the nudge key do not re-render the page.
func TestCounts(t *testing.T) {
	if counts(nil) {
		t.Error("no events count")
	}
	for key, want := range map[string]bool{store.HeartbeatKey("cp-1"): false, store.NudgeKey: false, store.NodeKey("cp-1"): true, store.LivenessKey: true, store.ElectionPrefix + "x": true} {
		if got := counts(events(key)); got != want {
			t.Errorf("counts(%s) = %v, want %v", key, got, want)
		}
	}
}

// TestReadersOnlyOverTLS: over TLS the page needs a client certificate of
// the CA for a reader identity: a viewer and root get it, a node's
// certificate gets 403, no certificate fails the handshake.
func TestReadersOnlyOverTLS(t *testing.T) {
	_, st := newStore(t, 1)
	dir := t.TempDir()
	f := etcdtest.IssueFiles(t, dir, pki.Request{CommonName: "status", Usage: pki.UsageServer, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	tlsCfg, err := pki.ServerTLS(f.CA, f.Cert, f.Key, true)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, &Server{Listen: "127.0.0.1:0", TLS: tlsCfg, Hub: &Hub{Store: st}})
	get := func(cfg *tls.Config) (int, error) {
		tr := &http.Transport{TLSClientConfig: cfg}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + addr + "/")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	for cn, want := range map[string]int{ViewerIdentity: 200, pki.RootIdentity: 200, pki.NodeIdentity("cp-1"): 403, "someone": 403} {
		if code, err := get(etcdtest.ClientTLS(t, cn)); err != nil || code != want {
			t.Errorf("GET as %s: %d, %v; want %d", cn, code, err, want)
		}
	}
	if _, err := get(&tls.Config{RootCAs: etcdtest.PKI(t).Pool()}); err == nil {
		t.Error("GET without a client certificate succeeded")
	}
}

// TestBindRefusesPlainBeyondLoopback: any address but loopback needs TLS
// with client certificates.
func TestBindRefusesPlainBeyondLoopback(t *testing.T) {
	for _, listen := range []string{":0", "0.0.0.0:0", "10.0.0.1:9490"} {
		if err := (&Server{Listen: listen}).Bind(); err == nil || !strings.Contains(err.Error(), "needs TLS") {
			t.Errorf("Bind(%q) = %v, want ErrNeedsTLS", listen, err)
		}
	}
}

func events(key string) []*clientv3.Event {
	return []*clientv3.Event{{Kv: &mvccpb.KeyValue{Key: []byte(key)}}}
}
