package config

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Validators return the reason a value is refused, naming the value and
// what is accepted; load prefixes it with "config: <key>: ".

// oneOf accepts exactly the listed values.
func oneOf(accepted ...string) func(string) error {
	return func(v string) error {
		if slices.Contains(accepted, v) {
			return nil
		}
		return fmt.Errorf("%q is not accepted; use one of %s", v, strings.Join(accepted, ", "))
	}
}

var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// dnsLabel accepts an RFC 1123 label, as Kubernetes does for names.
func dnsLabel(v string) error {
	if dnsLabelRE.MatchString(v) {
		return nil
	}
	return fmt.Errorf("%q is not accepted; use a DNS label: 1 to 63 lowercase letters, digits and '-', starting and ending with a letter or digit", v)
}

// notEmpty refuses the empty string.
func notEmpty(v string) error {
	if v != "" {
		return nil
	}
	return fmt.Errorf(`"" is not accepted; use a non-empty string`)
}

// absPath accepts an absolute path; with orEmpty it also accepts "".
func absPath(orEmpty bool) func(string) error {
	return func(v string) error {
		if filepath.IsAbs(v) || (orEmpty && v == "") {
			return nil
		}
		if orEmpty {
			return fmt.Errorf("%q is not accepted; use an absolute path, or leave it empty for the default", v)
		}
		return fmt.Errorf("%q is not accepted; use an absolute path", v)
	}
}

// storePrefix accepts an etcd key prefix that starts and ends with "/".
func storePrefix(v string) error {
	if strings.HasPrefix(v, "/") && strings.HasSuffix(v, "/") {
		return nil
	}
	return fmt.Errorf("%q is not accepted; use a prefix that starts and ends with /, e.g. /nico/v1/", v)
}

// urlProblem says what keeps v from being an http or https URL with a
// host and a port and nothing else, or "" when nothing does.
func urlProblem(v string) string {
	u, err := url.Parse(v)
	switch {
	case err != nil:
		return "it does not parse"
	case u.Scheme != "http" && u.Scheme != "https":
		return "the scheme is not http or https"
	case u.Opaque != "" || u.Host == "":
		return "it has no host"
	case u.User != nil:
		return "it has user information"
	case u.Path != "" && u.Path != "/":
		return "it has a path"
	case u.RawQuery != "" || u.Fragment != "":
		return "it has a query or fragment"
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" {
		return "it has no port"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "the port is not a number from 1 to 65535"
	}
	return ""
}

// each applies check to every item of a list.
func each(check func(string) error) func([]string) error {
	return func(vs []string) error {
		for _, v := range vs {
			if err := check(v); err != nil {
				return err
			}
		}
		return nil
	}
}

// nonEmptyList refuses an empty list; hint says what to list.
func nonEmptyList(hint string) func([]string) error {
	return func(vs []string) error {
		if len(vs) > 0 {
			return nil
		}
		return fmt.Errorf("[] is not accepted; %s", hint)
	}
}

// noDuplicates refuses a list with an item twice.
func noDuplicates(vs []string) error {
	for i, v := range vs {
		if slices.Contains(vs[:i], v) {
			return fmt.Errorf("%q is listed twice; list each item once", v)
		}
	}
	return nil
}

// between accepts lo <= d <= hi, or 0 < d <= hi when lo is 0; hi 0 means
// no upper bound. With seconds it also requires whole seconds, as etcd
// lease TTLs are.
func between(lo, hi time.Duration, seconds bool) func(time.Duration) error {
	return func(d time.Duration) error {
		ok := d >= lo && d > 0 && (hi == 0 || d <= hi) && (!seconds || d%time.Second == 0)
		if ok {
			return nil
		}
		want := "a duration"
		if seconds {
			want = "whole seconds"
		}
		switch {
		case lo <= 0 && hi == 0:
			want += " above 0"
		case lo <= 0:
			want += " above 0 and at most " + fmtDuration(hi)
		case hi == 0:
			want += " of at least " + fmtDuration(lo)
		default:
			want += " from " + fmtDuration(lo) + " to " + fmtDuration(hi)
		}
		return fmt.Errorf("%s is not accepted; use %s", fmtDuration(d), want)
	}
}

// positive accepts a duration above zero.
var positive = between(0, 0, false)

// fmtDuration writes 5m rather than 5m0s.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// noSpaceAround refuses a value with leading or trailing white space.
func noSpaceAround(v string) error {
	if strings.TrimSpace(v) != v {
		return fmt.Errorf("%q has leading or trailing space; give the value alone", v)
	}
	return nil
}

// intBetween accepts a whole number from lo to hi; unit names what it
// counts in the error.
func intBetween(lo, hi int, unit string) func(int) error {
	return func(n int) error {
		if n >= lo && n <= hi {
			return nil
		}
		return fmt.Errorf("%d is not accepted; use a number of %s from %d to %d", n, unit, lo, hi)
	}
}
