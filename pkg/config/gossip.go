package config

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/gossip"
)

// Gossip is how a program joins the gossip mesh (package gossip).
type Gossip struct {
	Bind      string   // "gossip.bind": IP to listen on
	Port      string   // "gossip.port": TCP and UDP port
	Advertise string   // "gossip.advertise": IP others reach this machine on; "" = bind
	Seeds     []string // "gossip.seeds": host or host:port of members to join through
	Profile   string   // "gossip.profile": lan, wan or fast
}

// Enabled tells whether the program joins the mesh: it does when it has
// seeds or a token (the bootstrap machine has no seed).
func (g Gossip) Enabled(tokenFile string) bool { return len(g.Seeds) > 0 || tokenFile != "" }

// PortNumber is Port as a number (validated).
func (g Gossip) PortNumber() int {
	p, _ := strconv.Atoi(g.Port)
	return p
}

// CoordinatorGossipPort is the coordinator's default gossip port: it runs
// beside an agent (gossip.DefaultPort) on control-plane machines.
const CoordinatorGossipPort = gossip.DefaultPort + 1

// gossipKeys are the gossip keys, shared by the agent and the coordinator.
func gossipKeys(g *Gossip, tokenFile *string, port int) []key {
	return []key{
		stringKey("gossip.bind", &g.Bind, "0.0.0.0", "IP address the gossip mesh listens on (TCP and UDP)", ipAddr(false)),
		stringKey("gossip.port", &g.Port, strconv.Itoa(port), "gossip port, TCP and UDP (0: any free port)", portNumber),
		stringKey("gossip.advertise", &g.Advertise, "", "IP address other machines reach the gossip mesh on; empty means gossip.bind, or with gossip.bind 0.0.0.0 a private address of the host, else its public one (on the default route), else 127.0.0.1 on a loopback-only host", ipAddr(true)),
		listKey("gossip.seeds", &g.Seeds, nil, "host or host:port of mesh members to join through; the etcd endpoints are learned from them", each(gossip.CheckSeed), noDuplicates),
		stringKey("gossip.profile", &g.Profile, string(gossip.ProfileLAN), "gossip timings: lan (crash seen in ~6 s), wan (~30 s), fast (~0.5 s, tests and small quiet networks)", oneOf(gossip.Profiles...)),
		stringKey("tokenFile", tokenFile, "", "file holding the cluster token; gossip keys are derived from its content", readableFile(true)),
	}
}

// gossipRule: seeds need the token their keys derive from.
func gossipRule(g *Gossip, tokenFile *string) rule {
	return rule{keys: []string{"tokenFile", "gossip.seeds"}, check: func() error {
		if len(g.Seeds) > 0 && *tokenFile == "" {
			return fmt.Errorf(`"" is not accepted with gossip.seeds %q: gossip is encrypted with a key derived from the cluster token; set tokenFile`, g.Seeds)
		}
		return nil
	}}
}

// ReadToken reads the cluster token from path, without surrounding space.
func ReadToken(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: tokenFile: %w", err)
	}
	t := []byte(strings.TrimSpace(string(b)))
	if len(t) == 0 {
		return nil, fmt.Errorf("config: tokenFile: %s is empty; put the cluster token in it", path)
	}
	return t, nil
}

// ipAddr accepts an IP address; with orEmpty also "".
func ipAddr(orEmpty bool) func(string) error {
	return func(v string) error {
		if (orEmpty && v == "") || net.ParseIP(v) != nil {
			return nil
		}
		return fmt.Errorf("%q is not accepted; use an IP address such as 10.0.0.1", v)
	}
}

// portNumber accepts 0 to 65535.
func portNumber(v string) error {
	if p, err := strconv.Atoi(v); err == nil && p >= 0 && p <= 65535 {
		return nil
	}
	return fmt.Errorf("%q is not accepted; use a port number, 0 to 65535", v)
}

// readableFile accepts a non-empty readable file; with orEmpty also "".
func readableFile(orEmpty bool) func(string) error {
	return func(v string) error {
		if orEmpty && v == "" {
			return nil
		}
		if _, err := ReadToken(v); err != nil {
			return fmt.Errorf("%q is not accepted: %v", v, strings.TrimPrefix(err.Error(), "config: tokenFile: "))
		}
		return nil
	}
}

// offOrAtLeast accepts 0 (off) or a duration of at least lo.
func offOrAtLeast(lo time.Duration) func(time.Duration) error {
	return func(d time.Duration) error {
		if d == 0 || d >= lo {
			return nil
		}
		return fmt.Errorf("%s is not accepted; use 0 (off) or at least %s", d, lo)
	}
}
