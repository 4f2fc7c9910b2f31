package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Bridge joins guests' network namespaces: a bridge in the host's
// namespace and one veth pair per guest, as tests/netns does.
type Bridge struct {
	t     testing.TB
	name  string
	n     int
	veths []string // host ends
}

// NewBridge makes a bridge; it is deleted (with its veths) when the test
// ends.
func NewBridge(t testing.TB) (*Bridge, error) {
	b := &Bridge{t: t, name: fmt.Sprintf("nsdbr%d", os.Getpid()%100000)}
	if err := run("ip", "link", "add", b.name, "type", "bridge"); err != nil {
		return nil, err
	}
	t.Cleanup(b.close)
	if err := run("ip", "link", "set", b.name, "up"); err != nil {
		return nil, err
	}
	// Bridged frames may pass the host's FORWARD chain (br_netfilter).
	_ = exec.Command("iptables", "-I", "FORWARD", "-i", b.name, "-o", b.name, "-j", "ACCEPT").Run()
	return b, nil
}

// Attach gives h an eth0 on the bridge with address cidr (like
// "10.0.0.1/24"), up, and its loopback up.
func (b *Bridge) Attach(ctx context.Context, h *Host, cidr string) error {
	b.n++
	host, peer := fmt.Sprintf("%s-%d", b.name, b.n), fmt.Sprintf("%sp%d", b.name, b.n)
	steps := [][]string{
		{"ip", "link", "add", host, "type", "veth", "peer", "name", peer},
		{"ip", "link", "set", peer, "netns", strconv.Itoa(h.PID), "name", "eth0"},
		{"ip", "link", "set", host, "master", b.name},
		{"ip", "link", "set", host, "up"},
	}
	for i, s := range steps {
		if err := run(s...); err != nil {
			return err
		}
		if i == 0 {
			b.veths = append(b.veths, host)
		}
	}
	for _, s := range [][]string{{"ip", "addr", "add", cidr, "dev", "eth0"}, {"ip", "link", "set", "eth0", "up"}, {"ip", "link", "set", "lo", "up"}} {
		if _, err := h.Exec(ctx, s...); err != nil {
			return err
		}
	}
	return nil
}

// Join gives the test's own network namespace the address cidr on the
// bridge, so that the test reaches the guests as a client would.
func (b *Bridge) Join(cidr string) error {
	return run("ip", "addr", "add", cidr, "dev", b.name)
}

func (b *Bridge) close() {
	// A veth goes with its guest's namespace, but that may be freed later
	// than the guest's last process; deleting one end deletes both.
	for _, v := range b.veths {
		_ = exec.Command("ip", "link", "del", v).Run()
	}
	_ = exec.Command("iptables", "-D", "FORWARD", "-i", b.name, "-o", b.name, "-j", "ACCEPT").Run()
	if err := run("ip", "link", "del", b.name); err != nil {
		b.t.Logf("harness: %v", err)
	}
}

func run(args ...string) error {
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
