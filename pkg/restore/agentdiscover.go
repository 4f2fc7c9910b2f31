package restore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// ErrNoAgent is returned when no agent given to discovery answers.
var ErrNoAgent = errors.New("restore: no agent answers")

// ParseAgents checks a list of agents' recovery addresses (host:port),
// naming the flag, the value and what is accepted.
func ParseAgents(flag string, addrs []string) ([]string, error) {
	var out []string
	for _, a := range addrs {
		a = strings.TrimSpace(a)
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("restore: %s %q: want host:port, the address an agent's recovery API listens on (recovery.listen)", flag, a)
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("restore: %s is empty: want at least one agent's host:port", flag)
	}
	return out, nil
}

// DiscoverAgents finds the control-plane agents from seeds (their recovery
// addresses): each seed names its own node (survey) and the control-plane
// agents its gossip mesh knows (peers), so one seed that answers is
// enough. It returns node -> address; seeds that do not answer are listed
// in the error only when none does.
func DiscoverAgents(ctx context.Context, seeds []string, tlsCfg *tls.Config, timeout time.Duration) (map[string]string, error) {
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, TLSHandshakeTimeout: timeout}}
	defer c.CloseIdleConnections()
	out := map[string]string{}
	var errs []error
	for _, seed := range seeds {
		sctx, cancel := context.WithTimeout(ctx, timeout)
		var h HostState
		err := callAgent(sctx, c, seed, http.MethodGet, PathSurvey, nil, nil, &h)
		var peers []AgentPeer
		if err == nil {
			err = callAgent(sctx, c, seed, http.MethodGet, PathPeers, nil, nil, &peers)
		}
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[h.Node] = seed
		for _, p := range peers {
			if _, ok := out[p.Node]; !ok && p.Node != "" && p.Addr != "" {
				out[p.Node] = p.Addr
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %w", ErrNoAgent, errors.Join(errs...))
	}
	return out, nil
}

// Survivors are the hosts of a survey as a recovery lists them, the most
// advanced answering voter first (like Survey).
func Survivors(hosts []HostState) []Survivor {
	out := make([]Survivor, 0, len(hosts))
	for _, h := range hosts {
		out = append(out, h.Survivor())
	}
	sortSurvivors(out)
	return out
}

// Only is the agents of nodes (the target and the others of a journal):
// the hosts a run acts on and releases.
func Only(agents map[string]string, nodes ...string) map[string]string {
	out := map[string]string{}
	for _, n := range nodes {
		if a, ok := agents[n]; ok {
			out[n] = a
		}
	}
	return out
}
