package etcdtest

import (
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Ports are picked below the kernel's ephemeral range: a port from ":0"
// is an ephemeral one, which any outgoing connection on the machine may
// take between FreePort and the listen, or between a member's stop and its
// restart on the same URL ("address already in use").
//
// A port handed out is also reserved for the rest of the process's life
// against every other test process on the machine (go test runs packages
// side by side): a member stopped and started again on the same URL leaves
// its port free for a while, and a bind check in another package would
// find it free and take it. The reservation is a lock file per port
// (flock), which the kernel releases when the process exits, however it
// exits.
const lowestPort = 10000

var (
	portMu    sync.Mutex
	portsUsed = map[int]bool{}
	// portLocks keeps the lock files open (and so locked) until exit; a
	// file dropped here would be closed by its finalizer.
	portLocks []*os.File
)

// PortLockDir holds the lock files of the reserved ports.
var PortLockDir = filepath.Join(os.TempDir(), "nico-test-ports")

// FreePort returns a loopback TCP port that was free a moment ago and that
// no other test process holds, outside the ephemeral range when there is
// room below it.
func FreePort(t testing.TB) int {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	if lo, hi := portRange(); hi > lo {
		for range 500 {
			p := lo + rand.IntN(hi-lo)
			if portsUsed[p] {
				continue
			}
			portsUsed[p] = true // taken or held elsewhere: not tried again
			if !reservePort(p) {
				continue
			}
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				continue
			}
			l.Close()
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

// reservePort takes port p's lock file for this process; false when
// another live process holds it. A lock directory that cannot be used
// leaves only the in-process guard (and says nothing: the bind check still
// runs).
func reservePort(p int) bool {
	if err := os.MkdirAll(PortLockDir, 0o777); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(PortLockDir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	portLocks = append(portLocks, f)
	return true
}

// portSpan, when set (by tests), is the range [lo, hi) FreePort picks from.
var portSpan [2]int

// portRange is where FreePort picks: from lowestPort up to the ephemeral
// range when there is room below it, else nothing (0, 0).
func portRange() (lo, hi int) {
	if portSpan[1] > 0 {
		return portSpan[0], portSpan[1]
	}
	if hi := ephemeralLow(); hi-lowestPort > 1000 {
		return lowestPort, hi
	}
	return 0, 0
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
