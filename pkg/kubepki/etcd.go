package kubepki

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdPerms are the permissions of cluster c's etcd role: read and write
// its key prefix (EtcdKeyPrefix, with the trailing slash), nothing else
// (see the package doc).
func EtcdPerms(c string) []rbac.Perm {
	p := EtcdKeyPrefix(c)
	return []rbac.Perm{
		{Type: rbac.ReadWrite, Key: p, RangeEnd: clientv3.GetPrefixRangeEnd(p)},
	}
}

// EtcdNamespacePerms are the permissions of cluster c's etcd role when
// its distribution cannot set a key prefix and reaches etcd through a
// namespacing proxy (spec.etcd.namespace): read and write all of
// ClusterKeyPrefix(c), the namespace's keys (the distribution's
// /registry/... and /bootstrap/...), nothing else.
func EtcdNamespacePerms(c string) []rbac.Perm {
	p := ClusterKeyPrefix(c)
	return []rbac.Perm{
		{Type: rbac.ReadWrite, Key: p, RangeEnd: clientv3.GetPrefixRangeEnd(p)},
	}
}

// EtcdNamespace is the namespace cluster c's proxy (package etcdnsproxy)
// prefixes every key with: ClusterKeyPrefix(c), with its trailing slash,
// so that every key a client names lies inside EtcdNamespacePerms (the
// distribution's "/registry/x" is stored at "/clusters/<c>//registry/x").
func EtcdNamespace(c string) string { return ClusterKeyPrefix(c) }

// EnsureEtcdIdentity makes cluster c's etcd user and role (EtcdUser) hold
// exactly EtcdPerms, through etcd's Auth API (auth: a root client), and
// returns the changes it made. Permissions the role has beyond them are
// revoked; the user holds that role alone. Idempotent.
func EnsureEtcdIdentity(ctx context.Context, auth clientv3.Auth, c string) ([]rbac.Change, error) {
	return ensureEtcdIdentity(ctx, auth, c, EtcdPerms)
}

// EnsureNamespacedEtcdIdentity is EnsureEtcdIdentity with
// EtcdNamespacePerms, for a cluster whose distribution reaches etcd
// through a namespacing proxy. The two may follow each other: the one
// called last leaves the role with its permissions alone.
func EnsureNamespacedEtcdIdentity(ctx context.Context, auth clientv3.Auth, c string) ([]rbac.Change, error) {
	return ensureEtcdIdentity(ctx, auth, c, EtcdNamespacePerms)
}

func ensureEtcdIdentity(ctx context.Context, auth clientv3.Auth, c string, perms func(string) []rbac.Perm) ([]rbac.Change, error) {
	if err := (Cluster{Name: c, Provider: ProviderExternal}).validate(); err != nil {
		return nil, err
	}
	name := EtcdUser(c)
	want := perms(c)
	var changes []rbac.Change
	role, err := auth.RoleGet(ctx, name)
	var have []rbac.Perm
	switch {
	case errors.Is(err, rpctypes.ErrRoleNotFound):
		changes = append(changes, rbac.Change{Op: rbac.AddRole, Role: name})
	case err != nil:
		return nil, fmt.Errorf("kubepki: get role %s: %w", name, err)
	default:
		for _, p := range role.Perm {
			have = append(have, rbac.Perm{Type: rbac.PermType(p.PermType.String()), Key: string(p.Key), RangeEnd: string(p.RangeEnd)})
		}
	}
	for _, p := range have {
		if !slices.ContainsFunc(want, func(q rbac.Perm) bool { return q.Key == p.Key && q.RangeEnd == p.RangeEnd }) {
			changes = append(changes, rbac.Change{Op: rbac.RevokePermission, Role: name, Perm: p})
		}
	}
	for _, p := range want {
		if !slices.Contains(have, p) {
			changes = append(changes, rbac.Change{Op: rbac.GrantPermission, Role: name, Perm: p})
		}
	}
	user, err := auth.UserGet(ctx, name)
	switch {
	case errors.Is(err, rpctypes.ErrUserNotFound):
		changes = append(changes, rbac.Change{Op: rbac.AddUser, User: name}, rbac.Change{Op: rbac.GrantRole, User: name, Role: name})
	case err != nil:
		return nil, fmt.Errorf("kubepki: get user %s: %w", name, err)
	default:
		if !slices.Contains(user.Roles, name) {
			changes = append(changes, rbac.Change{Op: rbac.GrantRole, User: name, Role: name})
		}
		for _, r := range user.Roles {
			if r != name {
				changes = append(changes, rbac.Change{Op: rbac.RevokeRole, User: name, Role: r})
			}
		}
	}
	if err := rbac.Apply(ctx, auth, changes); err != nil {
		return changes, fmt.Errorf("kubepki: etcd identity of %s: %w", c, err)
	}
	return changes, nil
}

// ClusterKeyPrefix is everything of cluster c in nico's etcd,
// /clusters/<c>/ (the slash keeps /clusters/<c>x/ out of it).
func ClusterKeyPrefix(c string) string { return "/clusters/" + c + "/" }

// Delete removes what cluster c left in nico's etcd and secret store:
// its etcd user and role (its certificate, still valid, then reaches
// nothing), every key under ClusterKeyPrefix(c) (the cluster's Kubernetes
// data, gone for good: take a snapshot before if it is wanted), its named
// secrets, and the NodeSecrets of machines (which held only this
// cluster's values). cli is a root client (scoped to nico's prefix or
// not: the keys, outside that prefix, are deleted through its connection). Absent parts are not an
// error: Delete may be repeated.
func Delete(ctx context.Context, cli *clientv3.Client, s *secrets.Store, c string, machines []string) error {
	if err := (Cluster{Name: c, Provider: ProviderExternal}).validate(); err != nil {
		return err
	}
	name := EtcdUser(c)
	if _, err := cli.UserDelete(ctx, name); err != nil && !errors.Is(err, rpctypes.ErrUserNotFound) {
		return fmt.Errorf("kubepki: delete etcd user %s: %w", name, err)
	}
	if _, err := cli.RoleDelete(ctx, name); err != nil && !errors.Is(err, rpctypes.ErrRoleNotFound) {
		return fmt.Errorf("kubepki: delete etcd role %s: %w", name, err)
	}
	if err := store.DeleteRawPrefix(ctx, cli, ClusterKeyPrefix(c)); err != nil {
		return fmt.Errorf("kubepki: %w", err)
	}
	all, _, err := secrets.List[api.Secret](ctx, s, store.NamedSecretsDir)
	if err != nil {
		return fmt.Errorf("kubepki: %w", err)
	}
	for _, sec := range all {
		if sec.Spec.Cluster != c {
			continue
		}
		if err := s.Delete(ctx, store.NamedSecretKey(sec.Metadata.Name)); err != nil {
			return fmt.Errorf("kubepki: delete secret %s: %w", sec.Metadata.Name, err)
		}
	}
	return Unproject(ctx, s, machines)
}

// Unproject deletes the NodeSecrets of machines (released from a cluster).
func Unproject(ctx context.Context, s *secrets.Store, machines []string) error {
	for _, m := range machines {
		key, err := store.KeyOf(api.NewNodeSecrets(m))
		if err != nil {
			return fmt.Errorf("kubepki: %w", err)
		}
		if err := s.Delete(ctx, key); err != nil {
			return fmt.Errorf("kubepki: delete %s: %w", key, err)
		}
	}
	return nil
}
