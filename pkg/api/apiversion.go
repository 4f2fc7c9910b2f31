package api

import (
	"fmt"
	"strings"
)

// Group is the API group of every kind (see the package doc).
const Group = "nico.homystack.io"

// DeprecatedGroup is the group a KubernetesCluster was first written in:
// still read, with the same version, as the current apiVersion.
const DeprecatedGroup = "nico.homystack.com"

// Version is the apiVersion of every kind but KubernetesCluster.
const Version = Group + "/v1"

// ClusterAPIVersion is the apiVersion of a KubernetesCluster: v1alpha1,
// its spec still changes shape between releases.
const ClusterAPIVersion = Group + "/v1alpha1"

// APIVersionFor is the apiVersion obj's type is stored with, whatever it
// holds.
func APIVersionFor(obj Object) string {
	if _, ok := obj.(*KubernetesCluster); ok {
		return ClusterAPIVersion
	}
	return Version
}

// APIVersionOfKind is the apiVersion objects of kind are stored with.
func APIVersionOfKind(kind string) string {
	if kind == KindKubernetesCluster {
		return ClusterAPIVersion
	}
	return Version
}

// DeprecatedAPIVersion is want's spelling in DeprecatedGroup.
func DeprecatedAPIVersion(want string) string {
	return DeprecatedGroup + strings.TrimPrefix(want, Group)
}

// CheckAPIVersion checks got, the apiVersion an object whose current
// apiVersion is want was written with. It returns deprecated true when got
// is want's spelling in DeprecatedGroup (read as want), and a *FieldError
// naming the accepted values when got is neither.
func CheckAPIVersion(want, got string) (deprecated bool, err error) {
	switch got {
	case want:
		return false, nil
	case DeprecatedAPIVersion(want):
		return true, nil
	}
	return false, &FieldError{Field: "apiVersion", Value: got,
		Accepted: fmt.Sprintf("use %s (%s is still read, deprecated)", want, DeprecatedAPIVersion(want))}
}

// DeprecationWarning is the notice for an object written with got, the
// deprecated spelling of want: the field, the value and what to write.
func DeprecationWarning(want, got string) string {
	return fmt.Sprintf("apiVersion: %q is deprecated; write apiVersion: %s", got, want)
}

// UpgradeAPIVersions rewrites a deprecated apiVersion in obj's type and
// owner references with the current one, as the store reads them. It
// returns the deprecated apiVersion obj's type held ("" when it held the
// current one), or an error when it held one not accepted.
func UpgradeAPIVersions(obj Object) (deprecated string, err error) {
	tm := obj.GetTypeMeta()
	want := APIVersionFor(obj)
	old, err := CheckAPIVersion(want, tm.APIVersion)
	if err != nil {
		return "", err
	}
	if old {
		deprecated = tm.APIVersion
	}
	tm.APIVersion = want
	refs := obj.GetMetadata().OwnerReferences
	for i := range refs {
		cur := APIVersionOfKind(refs[i].Kind)
		if refs[i].APIVersion == DeprecatedAPIVersion(cur) {
			refs[i].APIVersion = cur
		}
	}
	return deprecated, nil
}
