package clusternix

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// ComponentProvider says who runs a component (KubernetesCluster's
// components' provider).
type ComponentProvider string

// The component providers.
const (
	// Native (the default): the flake runs the component.
	Native ComponentProvider = "native"
	// External: something else runs it; the flake does not.
	External ComponentProvider = "external"
)

// Components are how the flake runs each Kubernetes component.
type Components struct {
	APIServer         Component
	ControllerManager Component
	Scheduler         Component
	Kubelet           Component
}

// Component is one component's provider, version, extra flags and unit
// limits.
type Component struct {
	// Provider is Native ("" too) or External.
	Provider ComponentProvider
	// Version is the component's Kubernetes version, as Cluster.Version
	// ("": the cluster's).
	Version string
	// ExtraArgs are flags by name without the leading "--"; cluster.nix
	// lists them sorted by name.
	ExtraArgs map[string]string
	// Limits are systemd settings of the component's unit by name:
	// CPUQuota and MemoryMax.
	Limits map[string]string
	// ExternalURL is an external component's readiness endpoint; empty
	// for a native one.
	ExternalURL string
}

// parts lists the components by their cluster.nix attribute names, in
// the order a control-plane machine starts them.
func (c Components) parts() []struct {
	name string
	c    Component
} {
	return []struct {
		name string
		c    Component
	}{{"apiServer", c.APIServer}, {"controllerManager", c.ControllerManager}, {"scheduler", c.Scheduler}, {"kubelet", c.Kubelet}}
}

var (
	flagNameRE  = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	limitKeys   = []string{"CPUQuota", "MemoryMax"}
	cpuQuotaRE  = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?%$`)
	memoryMaxRE = regexp.MustCompile(`^[1-9][0-9]*$`)
)

// validateComponents checks every component.
func validateComponents(cs Components) []error {
	var errs []error
	bad := func(fieldPath string, value any, accepted string) {
		errs = append(errs, fmt.Errorf("%w: %s %s: want %s", ErrInvalid, fieldPath, quote(value), accepted))
	}
	for _, p := range cs.parts() {
		at := "components." + p.name
		c := p.c
		switch c.Provider {
		case "", Native:
			if c.ExternalURL != "" {
				bad(at+".external.url", c.ExternalURL, "no URL with provider native")
			}
		case External:
			if u, err := url.Parse(c.ExternalURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(at+".external.url", c.ExternalURL, "an http or https URL with a host, the component's readiness endpoint")
			}
		default:
			bad(at+".provider", string(c.Provider), "one of native, external")
		}
		if c.Version != "" && !versionRE.MatchString(c.Version) {
			bad(at+".version", c.Version, `a Kubernetes version MAJOR.MINOR or MAJOR.MINOR.PATCH, or empty (the cluster's)`)
		}
		for _, k := range sortedKeys(c.ExtraArgs) {
			if !flagNameRE.MatchString(k) {
				bad(at+".extraArgs", k, "a flag name of lower-case letters, digits and '-', starting with a letter, without the leading --")
			} else if strings.ContainsAny(c.ExtraArgs[k], "\n\r\x00") {
				bad(at+".extraArgs."+k, c.ExtraArgs[k], "a value on one line")
			}
		}
		for _, k := range sortedKeys(c.Limits) {
			v := c.Limits[k]
			switch {
			case !slices.Contains(limitKeys, k):
				bad(at+".limits", k, "one of "+strings.Join(limitKeys, ", "))
			case k == "CPUQuota" && !cpuQuotaRE.MatchString(v):
				bad(at+".limits.CPUQuota", v, "a percentage of one CPU, as 50%")
			case k == "MemoryMax" && !memoryMaxRE.MatchString(v):
				bad(at+".limits.MemoryMax", v, "a positive number of bytes")
			}
		}
	}
	return errs
}

// renderComponents writes cluster.nix's components: each one's version
// (the cluster's when it names none).
func renderComponents(w func(int, string, ...any), cs Components, version string) {
	w(1, "components = {")
	for _, p := range cs.parts() {
		c := p.c
		provider := c.Provider
		if provider == "" {
			provider = Native
		}
		v := c.Version
		if v == "" {
			v = version
		}
		external := "null"
		if c.ExternalURL != "" {
			external = "{ url = " + Quote(c.ExternalURL) + "; }"
		}
		w(2, "%s = {", p.name)
		w(3, "provider = %s;", Quote(string(provider)))
		w(3, "version = %s;", Quote(strings.TrimPrefix(v, "v")))
		w(3, "extraArgs = %s;", attrs(c.ExtraArgs))
		w(3, "limits = %s;", attrs(c.Limits))
		w(3, "external = %s;", external)
		w(2, "};")
	}
	w(1, "};")
}

// attrs renders a string map as a Nix attribute set on one line, sorted
// by name, every name quoted.
func attrs(m map[string]string) string {
	if len(m) == 0 {
		return "{ }"
	}
	var b strings.Builder
	b.WriteString("{")
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(&b, " %s = %s;", Quote(k), Quote(m[k]))
	}
	b.WriteString(" }")
	return b.String()
}

// sortedKeys are m's keys, sorted.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
