package etcdclient

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// refuser accepts connections on loopback and closes each at once, counting
// them: a member that is down but whose port answers, as one restarting.
type refuser struct {
	ln    net.Listener
	dials atomic.Int64
	seen  chan struct{} // a value per accepted connection
}

func newRefuser(t *testing.T) *refuser {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &refuser{ln: ln, seen: make(chan struct{}, 1024)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
			r.dials.Add(1)
			r.seen <- struct{}{}
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return r
}

// TestRedialAfterRedialsSoon: a client with RedialAfter dials a member whose
// port closes every connection again and again within the time a client with
// gRPC's default backoff (a second) dials it twice; both run side by side.
func TestRedialAfterRedialsSoon(t *testing.T) {
	soon, slow := newRefuser(t), newRefuser(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, x := range []struct {
		r   *refuser
		cfg Config
	}{
		{soon, Config{Endpoints: []string{soon.ln.Addr().String()}, RedialAfter: 20 * time.Millisecond}},
		{slow, Config{Endpoints: []string{slow.ln.Addr().String()}}},
	} {
		cli, err := New(x.cfg)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			// Fails fast while the connection is down; asked again
			// until the test ends so that the client keeps dialling.
			for ctx.Err() == nil {
				rctx, rcancel := context.WithTimeout(ctx, 50*time.Millisecond)
				_, _ = cli.Get(rctx, "k")
				rcancel()
			}
		}()
		t.Cleanup(func() { cancel(); <-done; _ = cli.Close() })
	}
	// The default client's second dial comes a backoff (0.8-1.2 s) after
	// its first; by then the other has dialled at least four times.
	for range 2 {
		select {
		case <-slow.seen:
		case <-time.After(30 * time.Second):
			t.Fatalf("the default client dialled %d times in 30s, want 2", slow.dials.Load())
		}
	}
	if n := soon.dials.Load(); n < 4 {
		t.Fatalf("the client with RedialAfter 20ms dialled %d times while the default one dialled twice; want at least 4", n)
	}
	t.Logf("dials while the default client dialled twice: %d with RedialAfter 20ms", soon.dials.Load())
}
