package member

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tcpStates names the states of /proc/net/tcp's st column that can hold a
// port.
var tcpStates = map[string]string{
	"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
	"05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
	"09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING",
}

// socketOnPort is one TCP socket bound to a port, as /proc/net/tcp lists it.
type socketOnPort struct {
	local string // address:port
	state string // LISTEN, ESTABLISHED, ...
	inode string
}

// maxHolders bounds how many sockets a busy-port error names.
const maxHolders = 4

// portHolders says what holds TCP port on this host: the sockets bound to
// it, listeners first, each with the process that has it open when /proc
// shows it. Empty when nothing is found (no /proc, or the holder is gone).
func portHolders(port int) string {
	var socks []socketOnPort
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		socks = append(socks, socketsOnPort(f, port)...)
		f.Close()
	}
	if len(socks) == 0 {
		return ""
	}
	// Listeners first: they are what keeps a bind from succeeding.
	ordered := make([]socketOnPort, 0, len(socks))
	for _, s := range socks {
		if s.state == "LISTEN" {
			ordered = append(ordered, s)
		}
	}
	for _, s := range socks {
		if s.state != "LISTEN" {
			ordered = append(ordered, s)
		}
	}
	if len(ordered) > maxHolders {
		ordered = ordered[:maxHolders]
	}
	owners := socketOwners(ordered)
	parts := make([]string, 0, len(ordered))
	for _, s := range ordered {
		p := s.state + " " + s.local
		if o := owners[s.inode]; o != "" {
			p += " by " + o
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// socketsOnPort reads a /proc/net/tcp table and returns its sockets whose
// local port is port.
func socketsOnPort(r io.Reader, port int) []socketOnPort {
	var out []socketOnPort
	sc := bufio.NewScanner(r)
	sc.Scan() // the header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		addr, p, ok := parseProcAddr(f[1])
		if !ok || p != port {
			continue
		}
		state := tcpStates[strings.ToUpper(f[3])]
		if state == "" {
			state = "state " + f[3]
		}
		out = append(out, socketOnPort{local: net.JoinHostPort(addr, strconv.Itoa(p)), state: state, inode: f[9]})
	}
	return out
}

// parseProcAddr decodes /proc/net/tcp's "0100007F:2A5E": the address in
// the kernel's byte order (little-endian 32-bit words), the port in hex.
func parseProcAddr(s string) (string, int, bool) {
	host, port, ok := strings.Cut(s, ":")
	if !ok {
		return "", 0, false
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return "", 0, false
	}
	raw, err := hex.DecodeString(host)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return "", 0, false
	}
	ip := make(net.IP, len(raw))
	for w := 0; w < len(raw); w += 4 {
		for i := range 4 {
			ip[w+i] = raw[w+3-i]
		}
	}
	return ip.String(), int(p), true
}

// socketOwners finds, for each socket's inode, a process that has it open
// ("pid 812 (etcd)"), by reading the fd links under /proc. Processes this
// one may not look into are skipped.
func socketOwners(socks []socketOnPort) map[string]string {
	want := map[string]string{}
	for _, s := range socks {
		if s.inode != "" && s.inode != "0" {
			want["socket:["+s.inode+"]"] = s.inode
		}
	}
	owners := map[string]string{}
	if len(want) == 0 {
		return owners
	}
	pids, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range pids {
		fds, err := os.ReadDir(filepath.Join(dir, "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
			if err != nil {
				continue
			}
			inode, ok := want[link]
			if !ok || owners[inode] != "" {
				continue
			}
			comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
			owners[inode] = fmt.Sprintf("pid %s (%s)", filepath.Base(dir), strings.TrimSpace(string(comm)))
		}
		if len(owners) == len(want) {
			break
		}
	}
	return owners
}
