package httpserve

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/homystack/nico/pkg/logging"
)

// TestLoopback: only loopback hosts count; an empty host is every address.
func TestLoopback(t *testing.T) {
	for listen, want := range map[string]bool{
		"127.0.0.1:9479": true, "127.0.0.2:9479": true, "[::1]:9479": true, "localhost:9479": true,
		":9479": false, "0.0.0.0:9479": false, "10.0.0.1:9479": false, "nonsense": false,
	} {
		if got := Loopback(listen); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", listen, got, want)
		}
	}
}

// TestBindRefusesPlainBeyondLoopback: every address but loopback needs TLS
// that requires client certificates.
func TestBindRefusesPlainBeyondLoopback(t *testing.T) {
	for _, listen := range []string{":0", "0.0.0.0:0", "10.0.0.1:9490"} {
		e := &Endpoint{Name: "test", Listen: listen}
		if err := e.Bind(); !errors.Is(err, ErrNeedsTLS) {
			t.Errorf("Bind(%q) = %v, want ErrNeedsTLS", listen, err)
		}
	}
}

// TestServeEndsRequestsWithItsContext: a request still open (an event
// stream) ends when the endpoint's context does, and Serve returns.
func TestServeEndsRequestsWithItsContext(t *testing.T) {
	started := make(chan struct{})
	e := &Endpoint{Name: "test", Listen: "127.0.0.1:0", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
	})}
	if err := e.Bind(); err != nil {
		t.Fatal(err)
	}
	if e.Secure() {
		t.Fatal("plain loopback endpoint says it is secure")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Serve(ctx) }()
	resp, err := http.Get("http://" + e.Addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-started
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
}

// TestStartLogsAPortInUse: an address that cannot be bound is not fatal
// when the endpoint has a log; without one it is returned.
func TestStartLogsAPortInUse(t *testing.T) {
	first := &Endpoint{Name: "first", Listen: "127.0.0.1:0", Handler: http.NotFoundHandler()}
	stop, err := first.Start(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	second := &Endpoint{Name: "second", Listen: first.Addr(), Handler: http.NotFoundHandler()}
	if _, err := second.Start(t.Context(), nil); err == nil {
		t.Fatal("Start on a port in use without a log: no error")
	}
	second = &Endpoint{Name: "second", Listen: first.Addr(), Handler: http.NotFoundHandler(), Log: logging.Test(t)}
	stop2, err := second.Start(t.Context(), nil)
	if err != nil {
		t.Fatalf("Start on a port in use with a log: %v", err)
	}
	stop2()
}
