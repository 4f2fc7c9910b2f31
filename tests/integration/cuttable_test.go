package integration

import (
	"errors"
	"io"
	"log"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// errCut is what a cut transport's dials return.
var errCut = errors.New("test transport is cut")

// cuttable is a memberlist transport (real UDP and TCP on loopback) that,
// while cut, drops every packet and stream to and from its member: the
// others' probes go unanswered, as across a partition, and the member
// cannot refute their suspicion until it is healed.
type cuttable struct {
	*memberlist.NetTransport
	cut     atomic.Bool
	packets chan *memberlist.Packet
	streams chan net.Conn
	// stopping is closed when Shutdown starts: from then on what arrives
	// is dropped, so that NetTransport's listeners (blocked on an
	// unbuffered send) can end; done is closed once they have.
	stopping chan struct{}
	done     chan struct{}
	once     sync.Once
}

var _ memberlist.NodeAwareTransport = (*cuttable)(nil)

// newCuttable binds ip on a free port; the member that uses it (through
// gossip.Config.Tune) shuts it down.
func newCuttable(t *testing.T, ip string) *cuttable {
	t.Helper()
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{ip}, Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatalf("transport on %s: %v", ip, err)
	}
	c := &cuttable{NetTransport: nt, packets: make(chan *memberlist.Packet), streams: make(chan net.Conn),
		stopping: make(chan struct{}), done: make(chan struct{})}
	go forward(c, nt.PacketCh(), c.packets, func(*memberlist.Packet) {})
	go forward(c, nt.StreamCh(), c.streams, func(s net.Conn) { _ = s.Close() })
	t.Cleanup(func() { _ = c.Shutdown() })
	return c
}

// forward passes what arrives on in to out, dropping it while c is cut.
func forward[T any](c *cuttable, in <-chan T, out chan<- T, drop func(T)) {
	for {
		select {
		case <-c.done:
			return
		case v := <-in:
			if c.cut.Load() {
				drop(v)
				continue
			}
			select {
			case out <- v:
			case <-c.stopping:
				drop(v)
			}
		}
	}
}

// setCut cuts the member off (true) or heals it (false).
func (c *cuttable) setCut(cut bool) { c.cut.Store(cut) }

func (c *cuttable) WriteTo(b []byte, addr string) (time.Time, error) {
	if c.cut.Load() {
		return time.Now(), nil // lost on the way
	}
	return c.NetTransport.WriteTo(b, addr)
}

func (c *cuttable) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if c.cut.Load() {
		return time.Now(), nil
	}
	return c.NetTransport.WriteToAddress(b, a)
}

func (c *cuttable) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	return c.NetTransport.DialTimeout(addr, timeout)
}

func (c *cuttable) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	return c.NetTransport.DialAddressTimeout(a, timeout)
}

func (c *cuttable) PacketCh() <-chan *memberlist.Packet { return c.packets }
func (c *cuttable) StreamCh() <-chan net.Conn           { return c.streams }

// Shutdown is idempotent (memberlist and the test's cleanup both call it).
func (c *cuttable) Shutdown() error {
	var err error
	c.once.Do(func() {
		close(c.stopping)
		err = c.NetTransport.Shutdown()
		close(c.done)
	})
	return err
}
