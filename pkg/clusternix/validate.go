package clusternix

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ErrInvalid marks a Cluster that cannot be rendered; the error names the
// field, the value and what is accepted.
var ErrInvalid = errors.New("clusternix: invalid cluster")

var (
	dnsLabelRE  = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	versionRE   = regexp.MustCompile(`^v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))?$`)
	prefixRE    = regexp.MustCompile(`^(/[A-Za-z0-9._-]+)+$`)
	filePathRE  = regexp.MustCompile(`^(/[A-Za-z0-9._+@-]+)+$`)
	acceptLabel = "a DNS label: 1 to 63 lowercase letters, digits and '-', starting and ending with a letter or digit"
	acceptHost  = "an IP address or a DNS name of lowercase DNS labels joined by '.'"
)

// Validate checks c and returns every problem found, each wrapping
// ErrInvalid and naming the cluster.nix field, the value and what is
// accepted; nil when c renders.
func Validate(c Cluster) error {
	var errs []error
	bad := func(fieldPath string, value any, accepted string) {
		errs = append(errs, fmt.Errorf("%w: %s %s: want %s", ErrInvalid, fieldPath, quote(value), accepted))
	}
	if !dnsLabelRE.MatchString(c.Name) {
		bad("name", c.Name, acceptLabel)
	}
	if !versionRE.MatchString(c.Version) {
		bad("version", c.Version, `a Kubernetes version MAJOR.MINOR or MAJOR.MINOR.PATCH, for instance "1.37.2" (a leading "v" is accepted)`)
	}
	if !validHost(c.ControlPlaneEndpoint.Host) {
		bad("controlPlaneEndpoint.host", c.ControlPlaneEndpoint.Host, acceptHost)
	}
	if p := c.ControlPlaneEndpoint.Port; p < 1 || p > 65535 {
		bad("controlPlaneEndpoint.port", p, "a port from 1 to 65535")
	}

	seen := map[string]string{}
	nodes := func(role string, list []Node) {
		for i, n := range list {
			at := fmt.Sprintf("nodes.%s[%d]", role, i)
			if !dnsLabelRE.MatchString(n.Name) {
				bad(at+".name", n.Name, acceptLabel)
			} else if other, dup := seen[n.Name]; dup {
				bad(at+".name", n.Name, "a name no other node has (also at "+other+")")
			} else {
				seen[n.Name] = at
			}
			if len(n.Addresses) == 0 {
				bad(at+".addresses", none{}, "at least one address")
			}
			for j, a := range n.Addresses {
				if !validHost(a) {
					bad(fmt.Sprintf("%s.addresses[%d]", at, j), a, acceptHost)
				} else if slices.Index(n.Addresses, a) != j {
					bad(fmt.Sprintf("%s.addresses[%d]", at, j), a, "addresses listed once each")
				}
			}
		}
	}
	if len(c.Nodes.ControlPlane) == 0 {
		bad("nodes.controlPlane", none{}, "at least one control-plane node")
	}
	nodes("controlPlane", c.Nodes.ControlPlane)
	nodes("dataPlane", c.Nodes.DataPlane)
	if c.FirstServer != "" && !slices.ContainsFunc(c.Nodes.ControlPlane, func(n Node) bool { return n.Name == c.FirstServer }) {
		bad("firstServer", c.FirstServer, "the name of a node in nodes.controlPlane, or empty")
	}

	errs = append(errs, validateEtcd(c.Etcd, c.FirstServer)...)
	errs = append(errs, validateComponents(c.Components)...)

	byPath := map[string]string{}
	for _, f := range c.Paths.fields() {
		switch {
		case !filePathRE.MatchString(f.value) || path.Clean(f.value) != f.value:
			bad("paths."+f.name, f.value, "a clean absolute path of letters, digits and . _ + @ - (no spaces or quotes)")
		case byPath[f.value] != "":
			bad("paths."+f.name, f.value, "a path no other file has (also paths."+byPath[f.value]+")")
		default:
			byPath[f.value] = f.name
		}
	}
	return errors.Join(errs...)
}

// validateEtcd checks the datastore section against its provider.
func validateEtcd(e Etcd, firstServer string) []error {
	var errs []error
	bad := func(fieldPath string, value any, accepted string) {
		errs = append(errs, fmt.Errorf("%w: %s %s: want %s", ErrInvalid, fieldPath, quote(value), accepted))
	}
	switch e.Provider {
	case EtcdNico, EtcdExternal:
		if len(e.Endpoints) == 0 {
			bad("etcd.endpoints", none{}, "at least one endpoint with etcd.provider "+string(e.Provider))
		}
		if e.Provider == EtcdNico && e.Prefix == "" && e.Proxy == nil {
			bad("etcd.prefix", "", `a key prefix with etcd.provider nico, for instance "/clusters/NAME/registry" (or etcd.proxy)`)
		}
		if e.Proxy != nil && e.Provider != EtcdNico {
			bad("etcd.proxy", e.Proxy.Namespace, "no proxy with etcd.provider "+string(e.Provider)+" (the namespacing proxy is for nico's etcd)")
		}
	case EtcdDistribution:
		if len(e.Endpoints) != 0 {
			bad("etcd.endpoints", strings.Join(e.Endpoints, ","), "no endpoints with etcd.provider distribution (the distribution runs its own datastore)")
		}
		if e.Prefix != "" {
			bad("etcd.prefix", e.Prefix, "no prefix with etcd.provider distribution")
		}
		if firstServer == "" {
			bad("firstServer", "", "the control-plane node that initialises the datastore, with etcd.provider distribution")
		}
	default:
		bad("etcd.provider", string(e.Provider), "one of nico, external, distribution")
	}
	if x := e.Proxy; x != nil {
		if e.Prefix != "" {
			bad("etcd.prefix", e.Prefix, "no prefix with etcd.proxy (the distribution sets none: the proxy's namespace holds its keys)")
		}
		if !prefixRE.MatchString(strings.TrimSuffix(x.Namespace, "/")) || !strings.HasSuffix(x.Namespace, "/") {
			bad("etcd.proxy.namespace", x.Namespace, "a key prefix ending in '/', such as /clusters/NAME/")
		}
		if ip := net.ParseIP(x.Listen.Host); ip == nil || !ip.IsLoopback() {
			bad("etcd.proxy.listen.host", x.Listen.Host, "a loopback address, such as 127.0.0.1 (the proxy lends the cluster's etcd identity)")
		}
		if p := x.Listen.Port; p < 1 || p > 65535 {
			bad("etcd.proxy.listen.port", p, "a port from 1 to 65535")
		}
		if x.ClientCommonName == "" || strings.ContainsAny(x.ClientCommonName, "\"\\$\n") {
			bad("etcd.proxy.clientCommonName", x.ClientCommonName, "the cluster's etcd user, such as kubernetes:NAME")
		}
	}
	if e.Prefix != "" && !prefixRE.MatchString(e.Prefix) {
		bad("etcd.prefix", e.Prefix, "a key prefix such as /clusters/NAME/registry: '/'-separated parts of letters, digits and . _ -, no trailing '/'")
	}
	for i, ep := range e.Endpoints {
		if err := endpointURL(ep); err != "" {
			bad(fmt.Sprintf("etcd.endpoints[%d]", i), ep, err)
		} else if slices.Index(e.Endpoints, ep) != i {
			bad(fmt.Sprintf("etcd.endpoints[%d]", i), ep, "endpoints listed once each")
		}
	}
	return errs
}

// endpointURL returns what is wrong with an etcd client URL, or "".
func endpointURL(s string) string {
	const want = "an etcd client URL https://HOST:PORT or http://HOST:PORT, with no path"
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Path != "" || u.Opaque != "" {
		return want
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || !validHost(host) {
		return want
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return want
	}
	if u.String() != s {
		return want + " (written canonically, as " + u.String() + ")"
	}
	return ""
}

// validHost accepts an IP address or a DNS name of lowercase labels.
func validHost(h string) bool {
	if ip := net.ParseIP(h); ip != nil {
		return !strings.Contains(h, "%")
	}
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if !dnsLabelRE.MatchString(l) {
			return false
		}
	}
	return true
}

// quote renders a refused value for an error message.
func quote(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// none is an empty list in an error message.
type none struct{}

func (none) String() string { return "[]" }
