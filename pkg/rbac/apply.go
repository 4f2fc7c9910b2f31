package rbac

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/pki"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNoName is returned for a node without a name.
var ErrNoName = errors.New("rbac: node has no name")

// Observe reads the users and roles Plan looks at for nodes: the built-in
// root role and user, nico-coordinator, and each node's role and user.
// Absent ones are absent from the state.
func Observe(ctx context.Context, auth clientv3.Auth, nodes []NodeIdentity) (State, error) {
	s := State{Roles: map[string][]Perm{}, Users: map[string][]string{}}
	roles := []string{RootRole}
	users := []string{pki.RootIdentity, pki.CoordinatorIdentity}
	for _, n := range nodes {
		if n.Name == "" {
			return State{}, ErrNoName
		}
		roles = append(roles, NodeRole(n.Name))
		users = append(users, NodeRole(n.Name))
	}
	for _, r := range roles {
		resp, err := auth.RoleGet(ctx, r)
		if errors.Is(err, rpctypes.ErrRoleNotFound) {
			continue
		}
		if err != nil {
			return State{}, fmt.Errorf("rbac: get role %s: %w", r, err)
		}
		perms := make([]Perm, 0, len(resp.Perm))
		for _, p := range resp.Perm {
			perms = append(perms, Perm{Type: PermType(p.PermType.String()), Key: string(p.Key), RangeEnd: string(p.RangeEnd)})
		}
		s.Roles[r] = perms
	}
	for _, u := range users {
		resp, err := auth.UserGet(ctx, u)
		if errors.Is(err, rpctypes.ErrUserNotFound) {
			continue
		}
		if err != nil {
			return State{}, fmt.Errorf("rbac: get user %s: %w", u, err)
		}
		s.Users[u] = resp.Roles
	}
	return s, nil
}

// Apply performs changes in order. A role or user that already exists
// counts as added, a permission or role already revoked as revoked, so
// that two appliers racing (two join endpoints) both succeed.
func Apply(ctx context.Context, auth clientv3.Auth, changes []Change) error {
	for _, c := range changes {
		var err error
		switch c.Op {
		case AddRole:
			_, err = auth.RoleAdd(ctx, c.Role)
			if errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
				err = nil
			}
		case GrantPermission:
			_, err = auth.RoleGrantPermission(ctx, c.Role, c.Perm.Key, c.Perm.RangeEnd, permType(c.Perm.Type))
		case RevokePermission:
			_, err = auth.RoleRevokePermission(ctx, c.Role, c.Perm.Key, c.Perm.RangeEnd)
			if errors.Is(err, rpctypes.ErrPermissionNotGranted) {
				err = nil
			}
		case AddUser:
			_, err = auth.UserAddWithOptions(ctx, c.User, "", &clientv3.UserAddOptions{NoPassword: true})
			if errors.Is(err, rpctypes.ErrUserAlreadyExist) {
				err = nil
			}
		case GrantRole:
			_, err = auth.UserGrantRole(ctx, c.User, c.Role)
		case RevokeRole:
			_, err = auth.UserRevokeRole(ctx, c.User, c.Role)
			if errors.Is(err, rpctypes.ErrRoleNotGranted) {
				err = nil
			}
		default:
			err = fmt.Errorf("unknown change %q", c.Op)
		}
		if err != nil {
			return fmt.Errorf("rbac: %s: %w", c, err)
		}
	}
	return nil
}

func permType(t PermType) clientv3.PermissionType {
	switch t {
	case Read:
		return clientv3.PermissionType(clientv3.PermRead)
	case Write:
		return clientv3.PermissionType(clientv3.PermWrite)
	}
	return clientv3.PermissionType(clientv3.PermReadWrite)
}

// Ensure makes etcd hold the users and roles of nodes under prefix (and
// root and nico-coordinator), and returns what it changed.
func Ensure(ctx context.Context, auth clientv3.Auth, prefix string, nodes []NodeIdentity) ([]Change, error) {
	have, err := Observe(ctx, auth, nodes)
	if err != nil {
		return nil, err
	}
	changes := Plan(prefix, nodes, have)
	return changes, Apply(ctx, auth, changes)
}

// EnsureNode makes node name's etcd user and role (the join endpoint calls
// it when it admits a node). With auth enabled, auth must be a root client.
func EnsureNode(ctx context.Context, auth clientv3.Auth, prefix, name string, roles []api.Role) error {
	_, err := Ensure(ctx, auth, prefix, []NodeIdentity{{Name: name, Roles: roles}})
	return err
}

// EnableAuth makes the users and roles of nodes and turns etcd's
// authentication on, unless it is on already. The bootstrap machine calls
// it once its member serves, with itself among nodes: from then on every
// client needs a certificate whose Common Name is a user. Calling it again
// is harmless (it then needs a root client).
func EnableAuth(ctx context.Context, auth clientv3.Auth, prefix string, nodes []NodeIdentity, log *slog.Logger) error {
	changes, err := Ensure(ctx, auth, prefix, nodes)
	if err != nil {
		return err
	}
	st, err := auth.AuthStatus(ctx)
	if err != nil {
		return fmt.Errorf("rbac: auth status: %w", err)
	}
	if st.Enabled {
		if len(changes) > 0 {
			log.Info("etcd users and roles updated", "changes", len(changes))
		}
		return nil
	}
	if _, err := auth.AuthEnable(ctx); err != nil {
		return fmt.Errorf("rbac: auth enable: %w", err)
	}
	log.Info("etcd authentication enabled", "changes", len(changes), "nodes", len(nodes))
	return nil
}

// RemoveNode deletes node name's etcd user and role, so that its
// certificate, still valid, no longer reaches anything in etcd: the
// revocation of a removed machine. Absent ones are not an error.
func RemoveNode(ctx context.Context, auth clientv3.Auth, name string) error {
	if name == "" {
		return ErrNoName
	}
	r := NodeRole(name)
	if _, err := auth.UserDelete(ctx, r); err != nil && !errors.Is(err, rpctypes.ErrUserNotFound) {
		return fmt.Errorf("rbac: delete user %s: %w", r, err)
	}
	if _, err := auth.RoleDelete(ctx, r); err != nil && !errors.Is(err, rpctypes.ErrRoleNotFound) {
		return fmt.Errorf("rbac: delete role %s: %w", r, err)
	}
	return nil
}
