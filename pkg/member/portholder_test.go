package member

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
)

// TestCheckFreeNamesTheHolder: a busy port's error names the socket that
// holds it and the process that has it open, here this test's own listener.
func TestCheckFreeNamesTheHolder(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = checkFree("http://" + l.Addr().String())
	if err == nil {
		t.Fatal("checkFree on a listening port succeeded")
	}
	comm, _ := os.ReadFile("/proc/self/comm")
	want := fmt.Sprintf("LISTEN %s by pid %d (%s)", l.Addr(), os.Getpid(), strings.TrimSpace(string(comm)))
	if !strings.Contains(err.Error(), want) {
		t.Errorf("checkFree = %q, want it to contain %q", err, want)
	}
	if !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("checkFree = %q, want the bind error kept", err)
	}
}

// TestSocketsOnPort reads /proc/net/tcp and tcp6 lines: addresses in the
// kernel's byte order, ports in hex, the state named.
func TestSocketsOnPort(t *testing.T) {
	t.Parallel()
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:2A5E 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0 100 0 0 10 0
   1: 0100007F:2A5E 0100007F:9C40 06 00000000:00000000 03:00000123 00000000     0        0 0 3 0
   2: 0100007F:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 77 1 0
   3: 00000000000000000000000001000000:2A5E 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 99 1 0
   4: garbage
`
	got := socketsOnPort(strings.NewReader(table), 0x2A5E)
	want := []socketOnPort{
		{local: "127.0.0.1:10846", state: "LISTEN", inode: "4242"},
		{local: "127.0.0.1:10846", state: "TIME_WAIT", inode: "0"},
		{local: "[::1]:10846", state: "LISTEN", inode: "99"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("socketsOnPort = %v, want %v", got, want)
	}
}

// TestPortHoldersNothing: a port nothing holds gives no words to add.
func TestPortHoldersNothing(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	if got := portHolders(port); got != "" {
		t.Errorf("portHolders(%d) after close = %q, want empty", port, got)
	}
}
