package netns

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/jonboulle/clockwork"
)

// TestAdvertiseHelper is the pair of mesh members run inside a namespace by
// TestAdvertiseWithoutPrivateAddress; it is not a test of its own. Both
// bind 0.0.0.0 with no gossip.advertise; the second joins the first at
// the address the first advertises. It prints "advertised <host:port>".
func TestAdvertiseHelper(t *testing.T) {
	if os.Getenv("NICO_ADVERTISE_HELPER") != "1" {
		t.Skip("helper process for TestAdvertiseWithoutPrivateAddress")
	}
	fail := func(err error) {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	var ms []*gossip.Mesh
	for i, port := range []int{gossip.DefaultPort, gossip.DefaultPort + 1} {
		m, err := gossip.New(gossip.Config{Name: fmt.Sprintf("m%d", i), BindAddr: "0.0.0.0", BindPort: port, Profile: gossip.ProfileFast, Token: []byte("netns-token")})
		if err != nil {
			fail(err)
		}
		if err := m.Start(); err != nil {
			fail(err)
		}
		defer m.Shutdown()
		ms = append(ms, m)
	}
	if _, err := ms[1].Join([]string{ms[0].Addr()}); err != nil {
		fail(err)
	}
	err := testwait.Until(context.Background(), clockwork.NewRealClock(), 30*time.Second, 20*time.Millisecond, func() (bool, string) {
		n, ok := ms[0].Node("m1")
		return ok && n.State == gossip.Alive, fmt.Sprintf("m0 sees m1 %s", n.State)
	})
	if err != nil {
		fail(fmt.Errorf("m0 does not see m1 alive: %w", err))
	}
	fmt.Println("advertised", ms[0].Addr())
	os.Exit(0)
}

// TestAdvertiseWithoutPrivateAddress: in a namespace whose only address
// is loopback, and in one whose only other address is public, members
// bound to 0.0.0.0 with no gossip.advertise start (memberlist alone fails:
// "no private IP address found"), advertise 127.0.0.1 and the public
// address, and mesh with each other through it.
func TestAdvertiseWithoutPrivateAddress(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the netns advertise test needs root (ip netns): run `sudo make test-netns`")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("the netns advertise test needs ip (Debian: iproute2)")
	}
	tests := []struct {
		name  string
		setup [][]string // commands run in the namespace
		want  string
	}{
		{"loopback only", nil, "127.0.0.1"},
		{"public only", [][]string{
			{"ip", "link", "add", "pub0", "type", "veth", "peer", "name", "pub1"},
			{"ip", "addr", "add", "11.9.9.9/24", "dev", "pub0"},
			{"ip", "link", "set", "pub1", "up"},
			{"ip", "link", "set", "pub0", "up"},
			{"ip", "route", "add", "default", "dev", "pub0"},
		}, "11.9.9.9"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := fmt.Sprintf("nicoadv%d-%d", os.Getpid()%100000, i)
			sh(t, "ip", "netns", "add", ns)
			t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
			sh(t, "ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
			for _, c := range tt.setup {
				sh(t, append([]string{"ip", "netns", "exec", ns}, c...)...)
			}
			cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^TestAdvertiseHelper$")
			cmd.Env = append(os.Environ(), "NICO_ADVERTISE_HELPER=1")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("members in the namespace: %v\n%s", err, out)
			}
			want := fmt.Sprintf("advertised %s:%d", tt.want, gossip.DefaultPort)
			if !strings.Contains(string(out), want) {
				t.Fatalf("output lacks %q:\n%s", want, out)
			}
		})
	}
}
