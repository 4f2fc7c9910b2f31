package etcdadmin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// TestAStoppingMembersAnswerIsTransient: a member serving its client port
// over TLS hands gRPC requests to its gRPC server from its HTTP server (as
// etcd does); once the gRPC server has stopped and before the HTTP server
// has, a request gets an empty 200 answer, which the client reports as an
// unknown error. The request never reached etcd, and the error passes by
// itself (another member answers, or the member comes back).
func TestAStoppingMembersAnswerIsTransient(t *testing.T) {
	t.Parallel()
	gs := grpc.NewServer()
	gs.Stop()
	srv := httptest.NewUnstartedServer(gs)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{srv.URL}, TLS: &tls.Config{RootCAs: roots}, DialTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = cli.Put(ctx, "joins/n1", "x")
	if err == nil {
		t.Fatal("put to a stopped gRPC server succeeded")
	}
	if !Transient(err) {
		t.Fatalf("Transient(%v) = false, want true: the member that answered is stopping", err)
	}
	if wrapped := fmt.Errorf("store: put joins/n1: %w", err); !Transient(wrapped) {
		t.Fatalf("Transient(%v) = false, want true", wrapped)
	}
	if Transient(errors.New("malformed header: missing HTTP content-type")) {
		t.Fatal("an error that only reads like a stopping member's answer is transient")
	}
}
