package etcdversion

import "fmt"

// known is the latest patch of each etcd minor nico knows, oldest first.
// Every patch from .0 up to it counts as known. Checked against etcd's
// published releases (the Go module proxy's tags of
// go.etcd.io/etcd/server/v3 and etcd's CHANGELOG-3.4) in December 2026;
// 3.6.16 and 3.7.3 are the binaries the tests build (tests/etcdbin).
// Add a row, or raise a patch, when nico is tested with a newer release.
var known = []Version{
	{3, 4, 45},
	{3, 5, 35},
	{3, 6, 16},
	{3, 7, 3},
}

// downgradeAPIFrom is the first minor whose servers downgrade through
// etcd's downgrade API (validate, enable, then the rolling change).
var downgradeAPIFrom = Version{3, 6, 0}

// Known returns the latest known patch of every minor, oldest first.
func Known() []Version {
	return append([]Version(nil), known...)
}

// LatestPatch returns the latest known patch of v's minor, and whether
// that minor is known.
func LatestPatch(v Version) (Version, bool) {
	for _, k := range known {
		if k.SameMinor(v) {
			return k, true
		}
	}
	return Version{}, false
}

// IsKnown reports whether v is a release of a known minor no newer than
// that minor's latest known patch.
func IsKnown(v Version) bool {
	l, ok := LatestPatch(v)
	return ok && v.Patch <= l.Patch
}

// checkKnown returns an ErrUnknownVersion error naming what is known.
func checkKnown(v Version) error {
	if IsKnown(v) {
		return nil
	}
	if l, ok := LatestPatch(v); ok {
		return fmt.Errorf("%w: %s is newer than %s, the latest %s patch nico knows", ErrUnknownVersion, v, l, v.MinorString())
	}
	return fmt.Errorf("%w: %s; nico knows %s", ErrUnknownVersion, v, knownList())
}

// knownList is "3.4.0-3.4.45, 3.5.0-3.5.35, ...".
func knownList() string {
	s := ""
	for i, k := range known {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s.0-%s", k.MinorString(), k)
	}
	return s
}
