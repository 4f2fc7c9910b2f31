package config

import (
	"fmt"
	"net"
	"strconv"
	"time"
)

// DefaultJoinPort is the join endpoint's port (package enroll).
const DefaultJoinPort = 7950

// JoinEndpoint is the join endpoint (docs/security.md): control-plane
// agents holding the CA key serve it; a machine with no certificate gets
// its certificate through it with its join token (tokenFile).
type JoinEndpoint struct {
	Listen string // "join.listen": host:port served on control-plane machines
	// Endpoints are join endpoints (host:port) tried in order; empty: the
	// hosts of gossip.seeds at DefaultJoinPort.
	Endpoints []string // "join.endpoints"
	// RateBurst and RateInterval are the endpoint's per-source-IP token
	// bucket: RateBurst requests at once, then one per RateInterval.
	// Empty and 0: the default, 20 then one a second.
	RateBurst    string        // "join.rateBurst"
	RateInterval time.Duration // "join.rateInterval"
	// TokenPruneAfter is how long a join token that expired or was revoked
	// is kept (nicoctl token list shows it so) before the endpoint deletes
	// it; 0: 24h (token.DefaultPruneAfter).
	TokenPruneAfter time.Duration // "join.tokenPruneAfter"
}

// Rate is the token bucket as (burst, interval); zeros mean the default.
func (j JoinEndpoint) Rate() (int, time.Duration) {
	b, _ := strconv.Atoi(j.RateBurst)
	return b, j.RateInterval
}

// joinEndpointKeys are the agent's join endpoint keys.
func joinEndpointKeys(j *JoinEndpoint) []key {
	return []key{
		stringKey("join.listen", &j.Listen, fmt.Sprintf(":%d", DefaultJoinPort), "host:port on which control-plane agents holding the CA key serve the join endpoint (HTTPS)", hostPort),
		listKey("join.endpoints", &j.Endpoints, nil, fmt.Sprintf("join endpoints (host:port) a machine without a certificate gets one from with its token; empty means the hosts of gossip.seeds at port %d", DefaultJoinPort),
			each(hostPort), noDuplicates),
		stringKey("join.rateBurst", &j.RateBurst, "", "join requests one source IP may send at once; empty means 20", positiveIntOrEmpty),
		durationKey("join.rateInterval", &j.RateInterval, 0, "after the burst, one join request per source IP per this interval; 0 means 1s", atLeastZero),
		durationKey("join.tokenPruneAfter", &j.TokenPruneAfter, 0, "how long a join token that expired or was revoked is kept (and listed as such) before the join endpoint deletes it; 0 means 24h", atLeastZero),
	}
}

// withDefaults fills join.endpoints from the gossip seeds.
func (j *JoinEndpoint) withDefaults(seeds []string) {
	if len(j.Endpoints) > 0 {
		return
	}
	for _, s := range seeds {
		host := s
		if h, _, err := net.SplitHostPort(s); err == nil {
			host = h
		}
		j.Endpoints = append(j.Endpoints, net.JoinHostPort(host, strconv.Itoa(DefaultJoinPort)))
	}
}

// hostPort accepts host:port with a port number (the host may be empty
// to listen on every address).
func hostPort(v string) error {
	_, port, err := net.SplitHostPort(v)
	if err == nil {
		if p, perr := strconv.Atoi(port); perr == nil && p > 0 && p < 65536 {
			return nil
		}
	}
	return fmt.Errorf("%q is not accepted; use host:port, e.g. 10.0.0.1:%d or :%d", v, DefaultJoinPort, DefaultJoinPort)
}

// positiveIntOrEmpty accepts "" or a whole number above 0.
func positiveIntOrEmpty(v string) error {
	if n, err := strconv.Atoi(v); v == "" || err == nil && n > 0 {
		return nil
	}
	return fmt.Errorf("%q is not accepted; use a whole number above 0, or leave it empty for the default", v)
}

// atLeastZero accepts a duration of 0 (the default) or more.
func atLeastZero(d time.Duration) error {
	if d >= 0 {
		return nil
	}
	return fmt.Errorf("%s is not accepted; use 0 (the default) or a positive duration such as 2s", d)
}
