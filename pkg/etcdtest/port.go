package etcdtest

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Ports are picked below the kernel's ephemeral range: a port from ":0"
// is an ephemeral one, which any outgoing connection on the machine may
// take between FreePort and the listen, or between a member's stop and its
// restart on the same URL ("address already in use"). Ports handed out in
// this process are not handed out again.
const lowestPort = 10000

var (
	portMu    sync.Mutex
	portsUsed = map[int]bool{}
)

// FreePort returns a loopback TCP port that was free a moment ago, outside
// the ephemeral range when there is room below it.
func FreePort(t testing.TB) int {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	if hi := ephemeralLow(); hi-lowestPort > 1000 {
		for range 200 {
			p := lowestPort + rand.IntN(hi-lowestPort)
			if portsUsed[p] {
				continue
			}
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				continue
			}
			l.Close()
			portsUsed[p] = true
			return p
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	p := l.Addr().(*net.TCPAddr).Port
	portsUsed[p] = true
	return p
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// when it cannot be read).
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}
