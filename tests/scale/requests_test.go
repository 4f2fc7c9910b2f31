package scale

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/metrics/metricstest"
	"github.com/homystack/nico/pkg/pki"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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
func (c requestCounter) total() (float64, error) {
	var sum float64
	for _, u := range c.urls {
		f, err := metricstest.Scrape(c.http, u+"/metrics")
		if err != nil {
			return 0, err
		}
		n, err := servedRequests(f)
		if err != nil {
			return 0, fmt.Errorf("%s/metrics: %w", u, err)
		}
		sum += n
	}
	return sum, nil
}

// servedRequests sums the unary calls etcd's gRPC server handled and the
// messages it received on streams.
func servedRequests(f metricstest.Families) (float64, error) {
	unary, ok := f["grpc_server_handled_total"]
	if !ok {
		return 0, errors.New("no grpc_server_handled_total in the metrics")
	}
	sum := sumWhere(unary, func(typ string) bool { return typ == "unary" })
	if streams, ok := f["grpc_server_msg_received_total"]; ok {
		sum += sumWhere(streams, func(typ string) bool { return typ != "unary" })
	}
	return sum, nil
}

// sumWhere sums the counters of mf whose grpc_type label keep accepts.
func sumWhere(mf *dto.MetricFamily, keep func(grpcType string) bool) float64 {
	var sum float64
	for _, m := range mf.GetMetric() {
		var typ string
		for _, l := range m.GetLabel() {
			if l.GetName() == "grpc_type" {
				typ = l.GetValue()
			}
		}
		if keep(typ) {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// TestServedRequests: unary calls count once, stream messages once each,
// and what is neither is left out.
func TestServedRequests(t *testing.T) {
	in := strings.Join([]string{
		`# HELP grpc_server_handled_total Total number of RPCs completed on the server, regardless of success or failure.`,
		`# TYPE grpc_server_handled_total counter`,
		`grpc_server_handled_total{grpc_code="OK",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 120`,
		`grpc_server_handled_total{grpc_code="NotFound",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 3`,
		`grpc_server_handled_total{grpc_code="Canceled",grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"} 7`,
		`# TYPE grpc_server_msg_received_total counter`,
		`grpc_server_msg_received_total{grpc_method="LeaseKeepAlive",grpc_service="etcdserverpb.Lease",grpc_type="bidi_stream"} 40`,
		`grpc_server_msg_received_total{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 123`,
		`# TYPE grpc_server_started_total counter`,
		`grpc_server_started_total{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 124`,
		`# TYPE etcd_server_proposals_committed_total gauge`,
		`etcd_server_proposals_committed_total 9e+06`,
		``,
	}, "\n")
	got, err := servedRequests(parse(t, in))
	if err != nil {
		t.Fatal(err)
	}
	if got != 163 {
		t.Errorf("served %v requests, want 163 (123 unary, 40 stream messages)", got)
	}
	if _, err := servedRequests(parse(t, "# TYPE etcd_server_has_leader gauge\netcd_server_has_leader 1\n")); err == nil {
		t.Error("metrics without gRPC counters: no error")
	}
}

func parse(t *testing.T, exposition string) metricstest.Families {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}
