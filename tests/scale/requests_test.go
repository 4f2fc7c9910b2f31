package scale

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
)

// requestCounter reads how many client requests the etcd members served,
// from their /metrics: every unary call (a read, a write, a member list)
// and every message on a stream (a lease keep-alive, a watch request).
type requestCounter struct {
	urls []string
	http *http.Client
}

func newRequestCounter(tb testing.TB, clientURLs []string) requestCounter {
	tr := &http.Transport{TLSClientConfig: etcdtest.ClientTLS(tb, pki.RootIdentity)}
	tb.Cleanup(tr.CloseIdleConnections)
	return requestCounter{urls: clientURLs, http: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// total is the requests every member served so far.
func (c requestCounter) total(ctx context.Context) (float64, error) {
	var sum float64
	for _, u := range c.urls {
		n, err := c.served(ctx, u+"/metrics")
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

func (c requestCounter) served(ctx context.Context, url string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return servedRequests(bufio.NewScanner(resp.Body))
}

// servedRequests sums, in a Prometheus text exposition, the unary calls
// handled and the messages received on streams of etcd's gRPC server.
func servedRequests(in *bufio.Scanner) (float64, error) {
	var sum float64
	var seen bool
	for in.Scan() {
		line := in.Text()
		var counted bool
		switch {
		case strings.HasPrefix(line, "grpc_server_handled_total{"):
			counted = strings.Contains(line, `grpc_type="unary"`)
		case strings.HasPrefix(line, "grpc_server_msg_received_total{"):
			counted = !strings.Contains(line, `grpc_type="unary"`)
		}
		if !counted {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("metrics line %q: %w", line, err)
		}
		sum += v
		seen = true
	}
	if err := in.Err(); err != nil {
		return 0, err
	}
	if !seen {
		return 0, fmt.Errorf("no grpc_server_handled_total with grpc_type=\"unary\" in the metrics")
	}
	return sum, nil
}

// TestServedRequests: unary calls count once, stream messages once each,
// and what is neither is left out.
func TestServedRequests(t *testing.T) {
	in := strings.Join([]string{
		`# HELP grpc_server_handled_total Total number of RPCs completed on the server, regardless of success or failure.`,
		`grpc_server_handled_total{grpc_code="OK",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 120`,
		`grpc_server_handled_total{grpc_code="NotFound",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 3`,
		`grpc_server_handled_total{grpc_code="Canceled",grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"} 7`,
		`grpc_server_msg_received_total{grpc_method="LeaseKeepAlive",grpc_service="etcdserverpb.Lease",grpc_type="bidi_stream"} 40`,
		`grpc_server_msg_received_total{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 123`,
		`grpc_server_started_total{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 124`,
		`etcd_server_proposals_committed_total 9e+06`,
	}, "\n")
	got, err := servedRequests(bufio.NewScanner(strings.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	if got != 163 {
		t.Errorf("served %v requests, want 163 (123 unary, 40 stream messages)", got)
	}
	if _, err := servedRequests(bufio.NewScanner(strings.NewReader("etcd_server_has_leader 1\n"))); err == nil {
		t.Error("metrics without gRPC counters: no error")
	}
}
