package firstboot

import (
	"fmt"
	"net"
	"net/url"
	"slices"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/hypervisor"
)

// Ports of the etcd member of a control-plane VM.
const (
	PeerPort   = "2380"
	ClientPort = "2379"
)

// LocalAddrFunc returns the address of this machine that traffic to
// target (host:port) leaves from.
type LocalAddrFunc func(target string) (net.IP, error)

// RouteAddr is the real LocalAddrFunc: a UDP socket connected to target
// (no packet is sent) is given the source address of the route to it.
func RouteAddr(target string) (net.IP, error) {
	c, err := net.Dial("udp", target)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP, nil
}

// MemberEnv returns the etcd URLs of a control-plane VM as NICO_*
// settings: its member listens and is reached on the address it reaches
// the cluster from (its route to its first etcd endpoint, else to its
// first gossip seed), where the hypervisor host cannot know it (the VM's
// address comes from DHCP). It returns nothing for a machine without the
// controlPlane role, and an error when there is no endpoint or seed to
// route to, or no route.
func MemberEnv(id hypervisor.Identity, local LocalAddrFunc) (map[string]string, error) {
	if !slices.Contains(id.Roles, string(api.RoleControlPlane)) {
		return nil, nil
	}
	var target string
	switch {
	case len(id.Endpoints) > 0:
		u, err := url.Parse(id.Endpoints[0])
		if err != nil || u.Port() == "" {
			return nil, fmt.Errorf("firstboot: etcd endpoint %q: want a URL with a host and a port", id.Endpoints[0])
		}
		target = u.Host
	case len(id.Seeds) > 0:
		target = id.Seeds[0]
	default:
		return nil, fmt.Errorf("firstboot: %s has the controlPlane role but no etcd endpoint or gossip seed to find its own address from", id.Name)
	}
	ip, err := local(target)
	if err != nil {
		return nil, fmt.Errorf("firstboot: the address this machine reaches %s from: %w", target, err)
	}
	if ip.IsUnspecified() || (ip.IsLoopback() && !isLoopbackTarget(target)) {
		return nil, fmt.Errorf("firstboot: this machine reaches %s from %s, which the cluster cannot reach it on", target, ip)
	}
	host := ip.String()
	return map[string]string{
		"NICO_ETCD_PEERURL":   "https://" + net.JoinHostPort(host, PeerPort),
		"NICO_ETCD_CLIENTURL": "https://" + net.JoinHostPort(host, ClientPort),
	}, nil
}

// isLoopbackTarget tells whether target's host is a loopback address.
func isLoopbackTarget(target string) bool {
	h, _, err := net.SplitHostPort(target)
	ip := net.ParseIP(h)
	return err == nil && ip != nil && ip.IsLoopback()
}
