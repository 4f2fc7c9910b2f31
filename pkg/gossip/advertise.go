package gossip

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	sockaddr "github.com/hashicorp/go-sockaddr"
)

// ErrNoAdvertise is wrapped by the error of a member bound to the
// unspecified address that finds no address of the host to advertise.
var ErrNoAdvertise = errors.New("gossip: no address to advertise")

// HostAddr is one address of one of the host's network interfaces.
type HostAddr struct {
	IP        net.IP
	Interface string
	// Up: the interface is up.
	Up bool
	// Default: the interface carries a default route.
	Default bool
}

// HostAddrsFunc lists the host's interface addresses; HostAddrs is the
// real one, tests give their own list.
type HostAddrsFunc func() ([]HostAddr, error)

// HostAddrs lists the addresses of the host's interfaces (net.Interfaces),
// marking those of interfaces that carry a default route (read from
// /proc/net/route and /proc/net/ipv6_route; none when they cannot be read).
func HostAddrs() ([]HostAddr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("gossip: list network interfaces: %w", err)
	}
	def := defaultRouteInterfaces()
	var out []HostAddr
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("gossip: addresses of interface %s: %w", ifc.Name, err)
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			out = append(out, HostAddr{IP: ipn.IP, Interface: ifc.Name, Up: ifc.Flags&net.FlagUp != 0, Default: slices.Contains(def, ifc.Name)})
		}
	}
	return out, nil
}

// defaultRouteInterfaces names the interfaces of the host's IPv4 and IPv6
// default routes.
func defaultRouteInterfaces() []string {
	var names []string
	read := func(path string, isDefault func(f []string) (string, bool)) {
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if name, ok := isDefault(strings.Fields(sc.Text())); ok && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
	read("/proc/net/route", func(f []string) (string, bool) {
		if len(f) < 8 {
			return "", false
		}
		return f[0], f[1] == "00000000" && f[7] == "00000000"
	})
	// dest prefixlen src srcprefixlen nexthop metric refcnt use flags iface
	read("/proc/net/ipv6_route", func(f []string) (string, bool) {
		if len(f) != 10 {
			return "", false
		}
		return f[9], f[0] == strings.Repeat("0", 32) && f[1] == "00" && f[9] != "lo"
	})
	return names
}

// unspecified tells whether bind is 0.0.0.0 or ::, where memberlist has to
// pick the address it advertises.
func unspecified(bind string) bool {
	ip := net.ParseIP(bind)
	return ip != nil && ip.IsUnspecified()
}

// advertiseAddr is the address the member advertises: gossip.advertise
// when set; when it binds a specific address, "" (memberlist advertises
// that one); else ChooseAdvertise's pick among the host's addresses.
func (m *Mesh) advertiseAddr() (string, error) {
	if m.cfg.AdvertiseAddr != "" || !unspecified(m.cfg.BindAddr) {
		return m.cfg.AdvertiseAddr, nil
	}
	list := m.cfg.HostAddrs
	if list == nil {
		list = HostAddrs
	}
	addrs, err := list()
	if err != nil {
		return "", fmt.Errorf("%w: %w; set gossip.advertise to the IP address the other members reach this one on", ErrNoAdvertise, err)
	}
	ip, why, err := ChooseAdvertise(addrs)
	if err != nil {
		return "", err
	}
	if ip != "" {
		m.log.Warn("gossip.advertise is not set and the host has no private address; advertising "+why, "addr", ip, "hint", "set gossip.advertise to choose the address")
	}
	return ip, nil
}

// ChooseAdvertise picks the address a member bound to 0.0.0.0 or :: with
// no gossip.advertise advertises, from the host's addresses, and says why:
//
//   - "" when an up interface has a private (RFC 6890) address that is not
//     loopback or link-local: memberlist picks it itself, as it always did;
//   - else a public address of an interface with the default route (IPv4
//     first), or the host's one public address when no public address has
//     the default route;
//   - else, when every address of an up interface is a loopback one,
//     127.0.0.1 (or ::1): such a host can only mesh with itself, so nothing
//     else can be reached on the wrong address;
//
// and otherwise an error (ErrNoAdvertise) that lists the candidates and
// names gossip.advertise. It never guesses between several public
// addresses none of which has the default route.
func ChooseAdvertise(addrs []HostAddr) (ip, why string, err error) {
	var public, publicDefault, loopback, other []net.IP
	for _, a := range addrs {
		if !a.Up || a.IP == nil {
			continue
		}
		sa, perr := sockaddr.NewIPAddr(a.IP.String())
		switch {
		case a.IP.IsLoopback():
			loopback = append(loopback, a.IP)
		case perr != nil || sockaddr.IsRFC(sockaddr.ForwardingBlacklist, sa):
			other = append(other, a.IP) // link-local and the like
		case sockaddr.IsRFC(6890, sa):
			return "", "", nil
		case a.Default:
			publicDefault = append(publicDefault, a.IP)
		default:
			public = append(public, a.IP)
		}
	}
	v4first := func(ips []net.IP) net.IP {
		for _, ip := range ips {
			if ip.To4() != nil {
				return ip
			}
		}
		return ips[0]
	}
	switch {
	case len(publicDefault) > 0:
		return v4first(publicDefault).String(), "a public address of the default route's interface", nil
	case len(public) == 1:
		return public[0].String(), "the host's only public address", nil
	case len(public) > 1:
		return "", "", fmt.Errorf("%w: gossip.bind is unspecified and the host has several public addresses %v, none on the default route; set gossip.advertise to the one the other members reach this one on", ErrNoAdvertise, public)
	case len(loopback) > 0 && len(other) == 0:
		return v4first(loopback).String(), "loopback: the host has no other address, so it meshes only with itself", nil
	}
	return "", "", fmt.Errorf("%w: gossip.bind is unspecified and the host has no private or public address (up interfaces have %v); set gossip.advertise to the IP address the other members reach this one on", ErrNoAdvertise, append(loopback, other...))
}
