package rbac

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/pki"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNoName is returned for a node without a name.
var ErrNoName = errors.New("rbac: node has no name")

// Observe reads the users and roles Plan looks at for nodes: the built-in
// root role and user, nico-coordinator, and each node's role and user.
// Absent ones are absent from the state. The reads run concurrently.
func Observe(ctx context.Context, auth clientv3.Auth, nodes []NodeIdentity) (State, error) {
	roles := []string{RootRole}
	users := []string{pki.RootIdentity, pki.CoordinatorIdentity}
	for _, n := range nodes {
		if n.Name == "" {
			return State{}, ErrNoName
		}
		roles = append(roles, NodeRole(n.Name))
		users = append(users, NodeRole(n.Name))
	}
	rolePerms := make([][]Perm, len(roles))
	userRoles := make([][]string, len(users))
	found := make([]bool, len(roles)+len(users))
	errs := make([]error, len(roles)+len(users))
	var wg sync.WaitGroup
	for i, r := range roles {
		wg.Go(func() {
			resp, err := auth.RoleGet(ctx, r)
			switch {
			case errors.Is(err, rpctypes.ErrRoleNotFound):
			case err != nil:
				errs[i] = fmt.Errorf("rbac: get role %s: %w", r, err)
			default:
				perms := make([]Perm, 0, len(resp.Perm))
				for _, p := range resp.Perm {
					perms = append(perms, Perm{Type: PermType(p.PermType.String()), Key: string(p.Key), RangeEnd: string(p.RangeEnd)})
				}
				rolePerms[i], found[i] = perms, true
			}
		})
	}
	for i, u := range users {
		wg.Go(func() {
			resp, err := auth.UserGet(ctx, u)
			switch {
			case errors.Is(err, rpctypes.ErrUserNotFound):
			case err != nil:
				errs[len(roles)+i] = fmt.Errorf("rbac: get user %s: %w", u, err)
			default:
				userRoles[i], found[len(roles)+i] = resp.Roles, true
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return State{}, err
	}
	s := State{Roles: map[string][]Perm{}, Users: map[string][]string{}}
	for i, r := range roles {
		if found[i] {
			s.Roles[r] = rolePerms[i]
		}
	}
	for i, u := range users {
		if found[len(roles)+i] {
			s.Users[u] = userRoles[i]
		}
	}
	return s, nil
}

// Apply performs changes in order. A role or user that already exists
// counts as added, a permission or role already revoked as revoked, so
// that two appliers racing (two join endpoints) both succeed. The changes
// run one after another on purpose: with authentication on, etcd refuses
// an auth request received before another auth change was applied
// (ErrAuthOldRevision; the client retries it), so concurrent changes would
// still land one at a time, with the losers proposed again.
func Apply(ctx context.Context, auth clientv3.Auth, changes []Change) error {
	for _, c := range changes {
		if err := applyOne(ctx, auth, c); err != nil {
			return err
		}
	}
	return nil
}

// applyOne performs one change.
func applyOne(ctx context.Context, auth clientv3.Auth, c Change) error {
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
