// Package kubeversion knows which etcd versions each Kubernetes minor
// supports (the facts of kubeadm's table, README "Kubernetes versions")
// and decides whether a change of a KubernetesCluster's spec.version is
// one Kubernetes supports, and in which order it rolls. It is pure: no
// clock, no etcd.
package kubeversion

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrMalformed is returned for a string that is not [v]MAJOR.MINOR.PATCH.
var ErrMalformed = errors.New("kubeversion: malformed version")

// Version is a Kubernetes release version, major.minor.patch.
type Version struct {
	Major, Minor, Patch int
}

// Parse reads "1.37.2" or "v1.37.2": three dot-separated decimal numbers,
// no pre-release or build suffix.
func Parse(s string) (Version, error) {
	parts := strings.Split(strings.TrimPrefix(s, "v"), ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("%w %q: accepted is MAJOR.MINOR.PATCH, as 1.37.2 or v1.37.2", ErrMalformed, s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || p == "" || (len(p) > 1 && p[0] == '0') || p[0] == '+' {
			return Version{}, fmt.Errorf("%w %q: accepted is MAJOR.MINOR.PATCH in decimal, as 1.37.2", ErrMalformed, s)
		}
		n[i] = v
	}
	return Version{Major: n[0], Minor: n[1], Patch: n[2]}, nil
}

// MustParse is Parse for versions known to be well formed (tables,
// tests); it panics otherwise.
func MustParse(s string) Version {
	v, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return v
}

// String is "1.37.2".
func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// MinorString is "1.37".
func (v Version) MinorString() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Compare returns -1, 0 or 1 as v is older than, equal to or newer than w.
func (v Version) Compare(w Version) int {
	for _, d := range [3]int{v.Major - w.Major, v.Minor - w.Minor, v.Patch - w.Patch} {
		switch {
		case d < 0:
			return -1
		case d > 0:
			return 1
		}
	}
	return 0
}

// SameMinor reports whether v and w share major and minor.
func (v Version) SameMinor(w Version) bool { return v.Major == w.Major && v.Minor == w.Minor }
