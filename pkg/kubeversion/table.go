package kubeversion

import (
	"errors"
	"fmt"
	"strings"

	"github.com/homystack/nico/pkg/etcdversion"
)

// ErrUnsupported: a Kubernetes minor outside the table, or an etcd version
// the minor does not support.
var ErrUnsupported = errors.New("kubeversion: unsupported version")

// Support is what one Kubernetes minor supports of etcd.
type Support struct {
	// Minor is the Kubernetes minor, as {1, 37, 0}.
	Minor Version
	// Kubeadm is the etcd release kubeadm deploys for this minor.
	Kubeadm etcdversion.Version
	// MinEtcd is the oldest etcd release kubeadm accepts as an external
	// etcd for it.
	MinEtcd etcdversion.Version
}

// MaxEtcdMinor is the newest etcd minor the Kubernetes minor supports: the
// one kubeadm deploys for it (a newer etcd minor is not known to work).
func (s Support) MaxEtcdMinor() etcdversion.Version {
	return etcdversion.Version{Major: s.Kubeadm.Major, Minor: s.Kubeadm.Minor}
}

// Accepts reports whether etcd release e serves this minor: from MinEtcd
// up to any patch of MaxEtcdMinor.
func (s Support) Accepts(e etcdversion.Version) bool {
	maxMinor := s.MaxEtcdMinor()
	return e.Compare(s.MinEtcd) >= 0 &&
		(e.Major < maxMinor.Major || (e.Major == maxMinor.Major && e.Minor <= maxMinor.Minor))
}

// Range is "etcd 3.5.24 to 3.7.x (kubeadm deploys 3.7.0)".
func (s Support) Range() string {
	return fmt.Sprintf("etcd %s to %s.x (kubeadm deploys %s)", s.MinEtcd, s.MaxEtcdMinor().MinorString(), s.Kubeadm)
}

// String is "1.37: etcd 3.5.24 to 3.7.x (kubeadm deploys 3.7.0)".
func (s Support) String() string { return s.Minor.MinorString() + ": " + s.Range() }

// table is the facts of kubeadm's SupportedEtcdVersion map and
// MinExternalEtcdVersion (cmd/kubeadm/app/constants), oldest first:
// kubeadm v1.37.2 maps 1.34, 1.35 and 1.36 to etcd 3.7.0 (its own minor
// is not in its map; kubeadm falls back to the nearest row, 3.7.0) and
// accepts external etcd from 3.5.24; kubeadm v1.34 maps 1.31 to 1.33 to
// 3.5.24. Each row's floor is the newest kubeadm's MinExternalEtcdVersion
// that covers it. Add a row when nico is tested with a newer minor.
var table = []Support{
	{Version{1, 31, 0}, etcdversion.Version{Major: 3, Minor: 5, Patch: 24}, etcdversion.Version{Major: 3, Minor: 5, Patch: 24}},
	{Version{1, 32, 0}, etcdversion.Version{Major: 3, Minor: 5, Patch: 24}, etcdversion.Version{Major: 3, Minor: 5, Patch: 24}},
	{Version{1, 33, 0}, etcdversion.Version{Major: 3, Minor: 5, Patch: 24}, etcdversion.Version{Major: 3, Minor: 5, Patch: 24}},
	{Version{1, 34, 0}, etcdversion.Version{Major: 3, Minor: 7, Patch: 0}, etcdversion.Version{Major: 3, Minor: 5, Patch: 24}},
	{Version{1, 35, 0}, etcdversion.Version{Major: 3, Minor: 7, Patch: 0}, etcdversion.Version{Major: 3, Minor: 5, Patch: 24}},
	{Version{1, 36, 0}, etcdversion.Version{Major: 3, Minor: 7, Patch: 0}, etcdversion.Version{Major: 3, Minor: 5, Patch: 24}},
	{Version{1, 37, 0}, etcdversion.Version{Major: 3, Minor: 7, Patch: 0}, etcdversion.Version{Major: 3, Minor: 5, Patch: 24}},
}

// Table returns every row, oldest minor first.
func Table() []Support { return append([]Support(nil), table...) }

// Lookup returns the row of v's minor and whether there is one.
func Lookup(v Version) (Support, bool) {
	for _, s := range table {
		if s.Minor.SameMinor(v) {
			return s, true
		}
	}
	return Support{}, false
}

// Minors is "1.31, 1.32, ..., 1.37".
func Minors() string {
	var out []string
	for _, s := range table {
		out = append(out, s.Minor.MinorString())
	}
	return strings.Join(out, ", ")
}

// CheckKnown refuses a version whose minor is not in the table.
func CheckKnown(v Version) error {
	if _, ok := Lookup(v); ok {
		return nil
	}
	return fmt.Errorf("%w: Kubernetes %s is not in nico's table (it knows %s)", ErrUnsupported, v.MinorString(), Minors())
}

// CheckEtcd refuses Kubernetes version v over etcd release e (the fleet's
// etcd, for etcd.provider nico), naming what the minor accepts.
func CheckEtcd(v Version, e etcdversion.Version) error {
	s, ok := Lookup(v)
	if !ok {
		return CheckKnown(v)
	}
	if s.Accepts(e) {
		return nil
	}
	return fmt.Errorf("%w: Kubernetes %s does not support etcd %s; Kubernetes %s supports %s", ErrUnsupported, v, e, v.MinorString(), s.Range())
}
