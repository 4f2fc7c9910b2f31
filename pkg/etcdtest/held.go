package etcdtest

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"

	"go.etcd.io/etcd/server/v3/embed"
)

// Hold is a TCP front for a member's client listener that holds every
// connection unanswered until Release, then forwards it: a member that
// runs raft on its peer URL (it catches up, etcd may promote it) while
// nobody's status call reaches it, as a member whose publish has not gone
// through yet.
type Hold struct {
	ln       net.Listener
	target   string
	released chan struct{}
	closed   chan struct{}
	once     sync.Once
	close    sync.Once
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

// NewHold listens on a free loopback port in front of target (host:port);
// it is closed when the test ends.
func NewHold(t testing.TB, target string) *Hold {
	t.Helper()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", FreePort(t)))
	if err != nil {
		t.Fatalf("etcdtest: hold: %v", err)
	}
	h := &Hold{ln: ln, target: target, released: make(chan struct{}), closed: make(chan struct{})}
	h.wg.Go(h.accept)
	t.Cleanup(h.Close)
	return h
}

// Addr is the host:port the hold listens on.
func (h *Hold) Addr() string { return h.ln.Addr().String() }

// Release forwards every connection, held or new, from now on.
func (h *Hold) Release() { h.once.Do(func() { close(h.released) }) }

// Close stops listening, closes every connection and waits for them.
func (h *Hold) Close() {
	h.close.Do(func() {
		close(h.closed)
		_ = h.ln.Close()
		h.mu.Lock()
		for _, c := range h.conns {
			_ = c.Close()
		}
		h.mu.Unlock()
	})
	h.wg.Wait()
}

func (h *Hold) track(c net.Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.closed:
		_ = c.Close()
		return false
	default:
	}
	h.conns = append(h.conns, c)
	return true
}

func (h *Hold) accept() {
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		if !h.track(c) {
			return
		}
		h.wg.Go(func() { h.forward(c) })
	}
}

func (h *Hold) forward(c net.Conn) {
	select {
	case <-h.closed:
		return
	case <-h.released:
	}
	up, err := net.Dial("tcp", h.target)
	if err != nil || !h.track(up) {
		_ = c.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(up, c); _ = up.Close() })
	_, _ = io.Copy(c, up)
	_ = c.Close()
	wg.Wait()
}

// HeldMember is a member started into an existing cluster whose client
// URL, as it publishes it, is a Hold in front of its real listener.
type HeldMember struct {
	Name string
	// ClientURL is the URL the member publishes (the hold's); ListenURL
	// is its own listener, which answers at once.
	ClientURL, ListenURL, PeerURL string
	Hold                          *Hold
	Etcd                          *embed.Etcd
}

// StartHeld starts member name at peerURL into the cluster of
// initialCluster (one Start made: cluster token "etcdtest", TLS as
// TLSDefault says), its client listener behind a Hold. It does not wait
// for the member to be ready; the member is closed when the test ends.
func StartHeld(t testing.TB, name, peerURL, initialCluster string) *HeldMember {
	t.Helper()
	_, listen := URLs(t)
	lu, err := url.Parse(listen)
	if err != nil {
		t.Fatal(err)
	}
	h := NewHold(t, lu.Host)
	m := &HeldMember{Name: name, ListenURL: listen, ClientURL: lu.Scheme + "://" + h.Addr(), PeerURL: peerURL, Hold: h}
	cfg, err := NewConfig(name, filepath.Join(t.TempDir(), "etcd"), peerURL, listen, initialCluster, embed.ClusterStateFlagExisting)
	if err != nil {
		t.Fatal(err)
	}
	au, err := url.Parse(m.ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AdvertiseClientUrls = []url.URL{*au}
	applyTLS(cfg, MemberTLS(t, name, peerURL, listen))
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("etcdtest: start %s: %v", name, err)
	}
	m.Etcd = e
	t.Cleanup(e.Close)
	return m
}
