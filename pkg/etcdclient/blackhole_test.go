package etcdclient_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/etcdtest"
)

// blackHole is a TCP proxy to target that, once frozen, swallows every
// byte both ways while keeping its connections open: what a client sees
// of a host cut off by a firewall that drops packets.
type blackHole struct {
	ln     net.Listener
	target string
	frozen atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newBlackHole(t *testing.T, target string) *blackHole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackHole{ln: ln, target: target}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.close)
	return b
}

func (b *blackHole) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", b.target)
		if err != nil {
			c.Close()
			continue
		}
		b.mu.Lock()
		b.conns = append(b.conns, c, u)
		b.mu.Unlock()
		b.wg.Add(2)
		go b.pipe(c, u)
		go b.pipe(u, c)
	}
}

func (b *blackHole) pipe(dst, src net.Conn) {
	defer b.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !b.frozen.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (b *blackHole) close() {
	b.ln.Close()
	b.mu.Lock()
	for _, c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// TestBlackHoledEndpointIsLeft: a client of two endpoints of one member,
// one through a proxy that then swallows everything (a cut-off host: no
// reset, no error). Within 30 s every request goes through the other
// endpoint: the client's keepalives find the dead connection. Without
// them the balancer keeps sending about half of the requests into the
// hole, each until its deadline.
func TestBlackHoledEndpointIsLeft(t *testing.T) {
	c := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: false})
	direct := c.Members[0].ClientURL
	hole := newBlackHole(t, strings.TrimPrefix(direct, "http://"))
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: []string{"http://" + hole.ln.Addr().String(), direct}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	put := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := cli.Put(ctx, "k", "v")
		return err
	}
	for i := range 10 {
		if err := put(); err != nil {
			t.Fatalf("put %d before the freeze: %v", i, err)
		}
	}
	hole.frozen.Store(true)
	frozen := time.Now()
	deadline := time.Now().Add(30 * time.Second)
	ok, last := 0, error(nil)
	for ok < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("the client still sends into the black-holed endpoint after 30 s: %d puts in a row, last error %v", ok, last)
		}
		if last = put(); last != nil {
			ok = 0
			continue
		}
		ok++
	}
	t.Logf("every request through the live endpoint %s after the freeze", time.Since(frozen).Round(100*time.Millisecond))
}
