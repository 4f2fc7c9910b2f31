package gossip

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// Profile names a set of memberlist timings (see the package doc).
type Profile string

// Profiles.
const (
	ProfileLAN  Profile = "lan"
	ProfileWAN  Profile = "wan"
	ProfileFast Profile = "fast"
)

// Profiles lists the accepted profiles.
var Profiles = []string{string(ProfileLAN), string(ProfileWAN), string(ProfileFast)}

// DefaultPort is the gossip port (TCP and UDP) unless configured otherwise.
const DefaultPort = 7946

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("gossip: bad configuration")

// Config is a mesh member's configuration. The names in the field
// comments are the agent's configuration keys, and errors name them.
type Config struct {
	Name          string   // node name in the mesh, unique ("name")
	BindAddr      string   // IP to listen on ("gossip.bind")
	BindPort      int      // TCP and UDP port; 0 picks a free one ("gossip.port")
	AdvertiseAddr string   // IP others reach this member on; "" = BindAddr ("gossip.advertise")
	Seeds         []string // host or host:port of members to join through ("gossip.seeds")
	Profile       Profile  // timings ("gossip.profile")
	// Token is the cluster token (the content of "tokenFile"); keys are
	// derived from it. Key, when set, is used instead ("gossip.key").
	Token         []byte
	Key           []byte
	KeyGeneration uint64
	// DataDir, when set, keeps the key generation in use in KeyStateFile
	// there (0600): a restarted member starts at the generation it last
	// used, if higher than KeyGeneration ("dataDir").
	DataDir string
	Meta    Meta
	Logger  *slog.Logger
	// Now is the clock of state changes; time.Now when nil.
	Now func() time.Time
	// Tune, when set, adjusts the profile's memberlist timings before
	// Start (benchmarks of large meshes; nil in the programs).
	Tune func(*memberlist.Config)
	// HostAddrs lists the host's addresses, from which a member bound to
	// 0.0.0.0 or :: with no AdvertiseAddr picks one (advertise.go); nil:
	// the host's own (HostAddrs).
	HostAddrs HostAddrsFunc
}

// validate checks c and fills defaults.
func (c *Config) validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrConfig, key, fmt.Sprintf(format, a...)))
	}
	if c.Name == "" {
		bad("name", "empty; every member needs a unique name")
	}
	if c.Profile == "" {
		c.Profile = ProfileLAN
	}
	if _, ok := profileConfig(c.Profile); !ok {
		bad("gossip.profile", "%q is not accepted; use one of %v", c.Profile, Profiles)
	}
	if c.BindAddr == "" {
		c.BindAddr = "0.0.0.0"
	}
	if net.ParseIP(c.BindAddr) == nil {
		bad("gossip.bind", "%q is not an IP address", c.BindAddr)
	}
	if c.AdvertiseAddr != "" && net.ParseIP(c.AdvertiseAddr) == nil {
		bad("gossip.advertise", "%q is not an IP address", c.AdvertiseAddr)
	}
	if c.BindPort < 0 || c.BindPort > 65535 {
		bad("gossip.port", "%d is not a port (0 to 65535)", c.BindPort)
	}
	for _, s := range c.Seeds {
		if err := CheckSeed(s); err != nil {
			bad("gossip.seeds", "%v", err)
		}
	}
	switch {
	case c.Key != nil:
		if err := CheckKey(c.Key); err != nil {
			bad("gossip.key", "%v", err)
		}
	case len(c.Token) == 0:
		bad("tokenFile", "the cluster token is empty; gossip keys are derived from it")
	}
	if c.Meta.Name == "" {
		c.Meta.Name = c.Name
	}
	if _, err := c.Meta.Encode(); err != nil {
		bad("metadata", "%v", err)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return errors.Join(errs...)
}

// CheckSeed accepts host or host:port whose host resolves.
func CheckSeed(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = s, ""
	}
	if port != "" {
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("seed %q: port %q is not a port (1 to 65535)", s, port)
		}
	}
	if host == "" {
		return fmt.Errorf("seed %q: no host; use host or host:port", s)
	}
	if net.ParseIP(host) != nil {
		return nil
	}
	if _, err := net.LookupHost(host); err != nil {
		return fmt.Errorf("seed %q does not resolve: %v", s, err)
	}
	return nil
}

// profileConfig is memberlist's configuration for profile p.
func profileConfig(p Profile) (*memberlist.Config, bool) {
	switch p {
	case ProfileLAN:
		return memberlist.DefaultLANConfig(), true
	case ProfileWAN:
		return memberlist.DefaultWANConfig(), true
	case ProfileFast:
		c := memberlist.DefaultLANConfig()
		c.ProbeInterval = 100 * time.Millisecond
		c.ProbeTimeout = 50 * time.Millisecond
		c.SuspicionMult = 2
		c.GossipInterval = 50 * time.Millisecond
		c.PushPullInterval = 5 * time.Second
		c.TCPTimeout = time.Second
		c.GossipToTheDeadTime = 5 * time.Second
		return c, true
	}
	return nil, false
}

// PollInterval is how often a mesh of profile p reads its member list for
// suspect states: half the probe interval.
func (p Profile) PollInterval() time.Duration {
	c, ok := profileConfig(p)
	if !ok {
		return time.Second
	}
	return c.ProbeInterval / 2
}
