package api

import (
	"fmt"
	"math"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/homystack/nico/pkg/kubeversion"
)

// flagNameRE is a command-line flag's name without its dashes.
var flagNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// maxSkew is how many minors a component may run behind the API server
// (Kubernetes' version skew policy); none may run ahead of it.
var maxSkew = map[Part]int{PartControllerManager: 1, PartScheduler: 1, PartKubelet: 3}

// validateComponents checks every component's spec and their versions'
// skew against the API server's.
func (s KubernetesClusterSpec) validateComponents() []error {
	var errs []error
	for _, c := range Parts {
		errs = append(errs, s.Component(c).validate(c)...)
	}
	api, err := kubeversion.Parse(s.Component(PartAPIServer).VersionOr(s.Version))
	if err != nil {
		return errs
	}
	for _, c := range Parts[1:] {
		spec := s.Component(c)
		v, err := kubeversion.Parse(spec.VersionOr(s.Version))
		if err != nil || v.Major != api.Major {
			continue
		}
		at := c.Field() + ".version"
		if v.Minor > api.Minor {
			errs = append(errs, &FieldError{Field: at, Value: v.String(), Reason: "newer than the API server's " + api.String(),
				Accepted: "run " + c.Binary() + " at the API server's version or older (Kubernetes' version skew policy)"})
		} else if api.Minor-v.Minor > maxSkew[c] {
			errs = append(errs, &FieldError{Field: at, Value: v.String(), Reason: fmt.Sprintf("%d minors behind the API server's %s", api.Minor-v.Minor, api),
				Accepted: fmt.Sprintf("run %s at most %d minor(s) behind the API server (Kubernetes' version skew policy)", c.Binary(), maxSkew[c])})
		}
	}
	return errs
}

// validate checks one component's spec.
func (c ComponentSpec) validate(comp Part) []error {
	var errs []error
	at := comp.Field() // each field's path is at + its suffix

	refuse := func(field string, v any, reason, accepted string) {
		errs = append(errs, &FieldError{Field: at + field, Value: v, Reason: reason, Accepted: accepted})
	}
	switch c.ProviderOrDefault() {
	case ComponentNative:
		if c.External != nil {
			refuse(".external", c.External.URL, "given with provider native", "leave external out, or set provider: external")
		}
	case ComponentExternal:
		if c.External == nil {
			refuse(".external", "null", "provider external needs it", "give external.url, the component's readiness endpoint")
		}
	default:
		refuse(".provider", string(c.Provider), "", "use native (the default: the flake runs it) or external (nico only checks its readiness)")
	}
	if e := c.External; e != nil {
		if u, err := url.Parse(e.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			refuse(".external.url", e.URL, "", "use an http or https URL with a host, as https://10.0.0.5:6443/readyz")
		}
		if f := e.CAFile; f != "" && (!path.IsAbs(f) || path.Clean(f) != f) {
			refuse(".external.caFile", f, "", "give a clean absolute path on the control-plane machines, or leave it out")
		}
	}
	if c.Version != "" {
		if v, err := kubeversion.Parse(c.Version); err != nil {
			refuse(".version", c.Version, "not MAJOR.MINOR.PATCH", "use a Kubernetes release as 1.37.2 (minors "+kubeversion.Minors()+"), or leave it out (spec.version)")
		} else if err := kubeversion.CheckKnown(v); err != nil {
			refuse(".version", c.Version, "Kubernetes "+v.MinorString()+" is not in nico's version table", "use a release of "+kubeversion.Minors())
		}
	}
	names := make([]string, 0, len(c.ExtraArgs))
	for k := range c.ExtraArgs {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		f := ".extraArgs[" + k + "]"
		switch {
		case !flagNameRE.MatchString(k):
			refuse(f, k, "not a flag name", "name the flag in lower-case letters, digits and '-', starting with a letter and without the leading --, as audit-log-maxage")
		case OwnedFlag(comp, k) != "":
			refuse(f, k, "--"+k+" of "+comp.Binary()+" is set by nico: "+OwnedFlag(comp, k), "leave it out; set the flags nico does not own")
		case strings.ContainsAny(c.ExtraArgs[k], "\n\r\x00"):
			refuse(f, c.ExtraArgs[k], "a newline or NUL in the value", "give the value on one line")
		}
	}
	if r := c.Resources.CPU; r != "" {
		if _, err := ParseCPU(r); err != nil {
			refuse(".resources.cpu", r, err.Error(), "use a positive number of cores, as 2, 0.5 or 500m, or leave it out (no limit)")
		}
	}
	if r := c.Resources.Memory; r != "" {
		if _, err := ParseMemory(r); err != nil {
			refuse(".resources.memory", r, err.Error(), "use bytes of at least 1Mi, with a suffix Ki, Mi, Gi, Ti, k, M, G or T, as 512Mi or 2G, or leave it out (no limit)")
		}
	}
	return errs
}

// ParseCPU returns a CPU quantity ("2", "0.5", "500m") in millicores.
func ParseCPU(s string) (int64, error) {
	if m, ok := strings.CutSuffix(s, "m"); ok {
		n, err := strconv.ParseInt(m, 10, 64)
		if err != nil || n <= 0 || n > 1<<31 {
			return 0, fmt.Errorf("not a positive number of millicores")
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || strings.ContainsAny(s, "eEinfINFxX_+") || f <= 0 || f > 1<<21 {
		return 0, fmt.Errorf("not a positive number of cores")
	}
	n := int64(math.Round(f * 1000))
	if n == 0 {
		return 0, fmt.Errorf("less than one millicore")
	}
	return n, nil
}

// memorySuffixes are the quantity suffixes ParseMemory accepts.
var memorySuffixes = []struct {
	suffix string
	mult   int64
}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}}

// ParseMemory returns a memory quantity ("512Mi", "2G", "1073741824") in
// bytes, at least 1Mi.
func ParseMemory(s string) (int64, error) {
	num, mult := s, int64(1)
	for _, m := range memorySuffixes {
		if n, ok := strings.CutSuffix(s, m.suffix); ok {
			num, mult = n, m.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("not a positive whole number with an optional suffix")
	}
	if n*mult < 1<<20 {
		return 0, fmt.Errorf("less than 1Mi")
	}
	return n * mult, nil
}

// SystemdLimits returns r as systemd unit settings, by name: CPUQuota (a
// percentage of one CPU) and MemoryMax (bytes); an empty map with no
// limits. r must be valid.
func (r ComponentResources) SystemdLimits() map[string]string {
	out := map[string]string{}
	if m, err := ParseCPU(r.CPU); err == nil {
		out["CPUQuota"] = strconv.FormatFloat(float64(m)/10, 'f', -1, 64) + "%"
	}
	if b, err := ParseMemory(r.Memory); err == nil {
		out["MemoryMax"] = strconv.FormatInt(b, 10)
	}
	return out
}
