// Package etcdversion parses etcd versions and decides whether a change of
// the cluster's etcd version is a path etcd supports: patch changes within
// a minor, one minor up from the latest patch of the current minor, or one
// minor down through etcd's downgrade API. It is pure: no clock, no etcd.
package etcdversion

import (
	"errors"
	"fmt"

	"github.com/homystack/nico/pkg/releasever"
)

// ErrMalformed is returned for a string that is not MAJOR.MINOR.PATCH.
var ErrMalformed = errors.New("etcdversion: malformed version")

// Version is an etcd release version, major.minor.patch.
type Version struct {
	Major, Minor, Patch int
}

// Parse reads "3.6.16": three dot-separated decimal numbers, no "v"
// prefix, no pre-release or build suffix.
func Parse(s string) (Version, error) {
	t, ok := releasever.Parse(s)
	if !ok {
		return Version{}, fmt.Errorf("%w %q: accepted is MAJOR.MINOR.PATCH in decimal, as 3.6.16", ErrMalformed, s)
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

// String is "3.6.16".
func (v Version) String() string {
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
}

// MinorString is "3.6".
func (v Version) MinorString() string {
	return fmt.Sprintf("%d.%d", v.Major, v.Minor)
}

// Compare returns -1, 0 or 1 as v is older than, equal to or newer than w.
func (v Version) Compare(w Version) int { return releasever.Compare(v.triple(), w.triple()) }

func (v Version) triple() releasever.Triple { return releasever.Triple{v.Major, v.Minor, v.Patch} }

// SameMinor reports whether v and w share major and minor.
func (v Version) SameMinor(w Version) bool {
	return v.Major == w.Major && v.Minor == w.Minor
}
