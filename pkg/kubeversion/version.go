// Package kubeversion knows which etcd versions each Kubernetes minor
// supports (the facts of kubeadm's table; docs/kubernetes-clusters.md,
// "Kubernetes versions") and decides whether a change of a KubernetesCluster's spec.version is
// one Kubernetes supports, and in which order it rolls. It is pure: no
// clock, no etcd.
package kubeversion

import (
	"errors"
	"fmt"
	"strings"

	"github.com/homystack/nico/pkg/releasever"
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
	t, ok := releasever.Parse(strings.TrimPrefix(s, "v"))
	if !ok {
		return Version{}, fmt.Errorf("%w %q: accepted is MAJOR.MINOR.PATCH in decimal, as 1.37.2 or v1.37.2", ErrMalformed, s)
	}
	return Version{Major: t[0], Minor: t[1], Patch: t[2]}, nil
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
func (v Version) Compare(w Version) int { return releasever.Compare(v.triple(), w.triple()) }

func (v Version) triple() releasever.Triple { return releasever.Triple{v.Major, v.Minor, v.Patch} }

// SameMinor reports whether v and w share major and minor.
func (v Version) SameMinor(w Version) bool { return v.Major == w.Major && v.Minor == w.Minor }
