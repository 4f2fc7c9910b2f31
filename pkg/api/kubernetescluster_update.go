package api

import (
	"errors"
	"fmt"

	"github.com/homystack/nico/pkg/etcdversion"
	"github.com/homystack/nico/pkg/kubeversion"
)

// etcdProviderMigrations are the documented migrations of a live cluster
// from one etcd provider to another, by "from->to", each with the page
// that documents it. None exists yet: a cluster's objects live in its
// provider's datastore, and nico does not copy them across. A change of
// provider on a live cluster is refused until a row here says how.
var etcdProviderMigrations = map[string]string{}

// ValidateUpdate checks a change of a stored cluster (old) to next: what
// may not change on a live cluster, and a version change Kubernetes does
// not support. next on its own is checked by next.Validate. It returns
// every problem joined, each a *FieldError.
func ValidateUpdate(old, next *KubernetesCluster) error {
	var errs []error
	bad := func(field string, v any, reason, accepted string) {
		errs = append(errs, &FieldError{Field: field, Value: v, Reason: reason, Accepted: accepted})
	}
	if old.Deleting() {
		bad("metadata.name", old.Metadata.Name, "the cluster is being deleted (since "+old.Metadata.DeletionTimestamp.UTC().Format("2006-01-02T15:04:05Z")+")",
			"wait until it is gone (nicoctl delete cluster "+old.Metadata.Name+" --wait), then create it again")
		return errors.Join(errs...)
	}
	from, to := old.Spec.Etcd.ProviderOrDefault(), next.Spec.Etcd.ProviderOrDefault()
	if from != to {
		if _, ok := etcdProviderMigrations[string(from)+"->"+string(to)]; !ok {
			bad("spec.etcd.provider", string(to),
				fmt.Sprintf("the cluster is live on provider %s, and no documented migration from %s to %s exists: its objects live in %s's datastore and nico does not move them", from, from, to, from),
				fmt.Sprintf("keep provider %s, or back the cluster up, delete it and create it again with provider %s", from, to))
		}
	}
	if o, n := old.Spec.Etcd.Namespace, next.Spec.Etcd.Namespace; o != n && from == to {
		where := func(ns bool) string {
			if ns {
				return ClusterEtcdNamespace(old.Metadata.Name) + "/registry/ (the namespacing proxy's)"
			}
			return ClusterEtcdPrefix(old.Metadata.Name) + "/ (--etcd-prefix)"
		}
		bad("spec.etcd.namespace", n,
			"the cluster is live with its objects under "+where(o)+" and nico does not move them to "+where(n),
			fmt.Sprintf("keep spec.etcd.namespace: %v, or back the cluster up, delete it and create it again", o))
	}
	if o, n := old.Spec.ControlPlaneEndpoint, next.Spec.ControlPlaneEndpoint; o != n {
		bad("spec.controlPlaneEndpoint", n, "the endpoint is immutable: the API servers' certificates, every kubeconfig and every kubelet name it",
			fmt.Sprintf("keep %q (put a VIP or DNS name in front of a new address instead)", o))
	}
	if _, err := VersionChange(old, next.Spec); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, componentVersionChanges(old.Spec, next.Spec)...)
	return errors.Join(errs...)
}

// componentVersionChanges refuses a change of a component's own version
// that Kubernetes does not support (as spec.version's: a patch, or one
// minor up), from the version it ran at (its own, else the cluster's).
// A component that names no version, before or after, follows
// spec.version and is checked there.
func componentVersionChanges(old, next KubernetesClusterSpec) []error {
	var errs []error
	for _, p := range Parts {
		o, n := old.Component(p), next.Component(p)
		if o.Version == "" && n.Version == "" {
			continue
		}
		from, to := o.VersionOr(old.Version), n.VersionOr(next.Version)
		if _, err := kubeversion.CheckStrings(from, to); err != nil {
			fe := &FieldError{Field: p.Field() + ".version", Value: to, Reason: fmt.Sprintf("from %s %s: %v", p.Binary(), from, err),
				Accepted: "keep the version, or take one step Kubernetes supports: a patch within the minor, or one minor up"}
			var ce *kubeversion.ChangeError
			if errors.As(err, &ce) {
				fe.Reason = fmt.Sprintf("%s from %s to %s: %s", p.Binary(), from, to, ce.Reason)
				if ce.Next != "" {
					fe.Accepted = ce.Next
				}
			}
			errs = append(errs, fe)
		}
	}
	return errs
}

// VersionChange decides the change of spec.version from the stored
// cluster to spec: checked from the stored spec.version and, while a roll
// is unfinished, from the version every machine last applied
// (status.version). It tells the roll's order (Change.ControlPlaneFirst).
// A refusal is a *FieldError on spec.version naming both versions and the
// next allowed step.
func VersionChange(old *KubernetesCluster, spec KubernetesClusterSpec) (kubeversion.Change, error) {
	var change kubeversion.Change
	var errs []error
	froms := []struct{ what, v string }{{"the stored spec.version", old.Spec.Version}}
	if s := old.Status.Version; s != "" && s != old.Spec.Version {
		froms = append(froms, struct{ what, v string }{"the version the machines run (status.version)", s})
	}
	for i, from := range froms {
		c, err := kubeversion.CheckStrings(from.v, spec.Version)
		if err == nil {
			if i == 0 {
				change = c
			}
			continue
		}
		fe := &FieldError{Field: "spec.version", Value: spec.Version, Reason: fmt.Sprintf("from %s %s: %v", from.what, from.v, err),
			Accepted: "keep the version, or take one step Kubernetes supports: a patch within the minor, or one minor up"}
		var ce *kubeversion.ChangeError
		if errors.As(err, &ce) {
			fe.Reason = fmt.Sprintf("from %s %s to %s: %s", from.what, from.v, spec.Version, ce.Reason)
			if ce.Next != "" {
				fe.Accepted = ce.Next
			}
		}
		errs = append(errs, fe)
	}
	if len(errs) > 0 {
		return kubeversion.Change{}, errors.Join(errs...)
	}
	return change, nil
}

// CheckFleetEtcd refuses a spec.version that does not support the etcd
// versions the fleet's members run (provider nico only; other providers'
// datastores are the user's), one *FieldError per refused version.
func (s KubernetesClusterSpec) CheckFleetEtcd(running []string) []error {
	if s.Version == "" || s.Etcd.ProviderOrDefault() != EtcdProviderNico {
		return nil
	}
	k, err := kubeversion.Parse(s.Version)
	if err != nil {
		return nil // Validate names it
	}
	var errs []error
	seen := map[string]bool{}
	for _, r := range running {
		if r == "" || seen[r] {
			continue
		}
		seen[r] = true
		e, err := etcdversion.Parse(r)
		if err != nil {
			continue
		}
		sup, known := kubeversion.Lookup(k)
		if err := kubeversion.CheckEtcd(k, e); err != nil && known {
			errs = append(errs, &FieldError{Field: "spec.version", Value: s.Version,
				Reason:   fmt.Sprintf("the fleet's etcd runs %s, and Kubernetes %s supports %s", e, k.MinorString(), sup.Range()),
				Accepted: "choose a Kubernetes minor that supports etcd " + e.MinorString() + " (docs/kubernetes-clusters.md, Kubernetes versions), or change the fleet's etcd version first"})
		}
	}
	return errs
}
