package bench

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// leanTransport is memberlist's transport as NetTransport does it (UDP
// packets and TCP streams on one port), except that it reads every packet
// into one reused buffer and hands memberlist a copy of the packet's size.
// NetTransport allocates a fresh 64 KiB buffer per packet (and a queued
// packet keeps it): with 500 members in one process that was three fifths
// of all allocation, and most of the heap while the handoff queues were
// full. Each member of a real fleet reads its few packets a second on its
// own machine, so the production profiles keep NetTransport.
type leanTransport struct {
	udp     *net.UDPConn
	tcp     *net.TCPListener
	packets chan *memberlist.Packet
	streams chan net.Conn
	done    chan struct{}
	closed  atomic.Bool
	wg      sync.WaitGroup
}

var _ memberlist.NodeAwareTransport = (*leanTransport)(nil)

// newLeanTransport listens on a free port of ip, TCP and UDP alike.
func newLeanTransport(ip string) (*leanTransport, error) {
	addr := net.ParseIP(ip)
	var errs []error
	for range 10 {
		tcp, err := net.ListenTCP("tcp", &net.TCPAddr{IP: addr})
		if err != nil {
			return nil, err
		}
		udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: addr, Port: tcp.Addr().(*net.TCPAddr).Port})
		if err != nil { // the UDP port is taken: another port
			tcp.Close()
			errs = append(errs, err)
			continue
		}
		t := &leanTransport{udp: udp, tcp: tcp, packets: make(chan *memberlist.Packet), streams: make(chan net.Conn), done: make(chan struct{})}
		t.wg.Add(2)
		go t.readPackets()
		go t.acceptStreams()
		return t, nil
	}
	return nil, fmt.Errorf("no port free for both TCP and UDP on %s: %w", ip, errors.Join(errs...))
}

func (t *leanTransport) readPackets() {
	defer t.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, from, err := t.udp.ReadFrom(buf)
		ts := time.Now()
		if err != nil {
			if t.closed.Load() {
				return
			}
			continue
		}
		if n < 1 {
			continue
		}
		select {
		case t.packets <- &memberlist.Packet{Buf: bytes.Clone(buf[:n]), From: from, Timestamp: ts}:
		case <-t.done:
			return
		}
	}
}

func (t *leanTransport) acceptStreams() {
	defer t.wg.Done()
	for {
		conn, err := t.tcp.AcceptTCP()
		if err != nil {
			if t.closed.Load() {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		select {
		case t.streams <- conn:
		case <-t.done:
			conn.Close()
			return
		}
	}
}

// FinalAdvertiseAddr is the address listened on (the member's
// configured port is 0: any).
func (t *leanTransport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	a := t.udp.LocalAddr().(*net.UDPAddr)
	return a.IP, a.Port, nil
}

func (t *leanTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	a, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return time.Time{}, err
	}
	_, err = t.udp.WriteTo(b, a)
	return time.Now(), err
}

func (t *leanTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return t.WriteTo(b, a.Addr)
}

func (t *leanTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }
func (t *leanTransport) StreamCh() <-chan net.Conn           { return t.streams }

func (t *leanTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	return d.Dial("tcp", addr)
}

func (t *leanTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}

func (t *leanTransport) Shutdown() error {
	if t.closed.Swap(true) {
		return nil
	}
	close(t.done)
	t.udp.Close()
	t.tcp.Close()
	t.wg.Wait()
	return nil
}
