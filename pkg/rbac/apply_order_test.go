package rbac_test

import (
	"context"
	"sync"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// orderAuth is an etcd Auth that refuses, as etcd does, a grant on a role
// or user not yet added, and records every call in the order it came.
type orderAuth struct {
	clientv3.Auth // calls Apply does not make panic
	mu            sync.Mutex
	roles, users  map[string]bool
	calls         []string
}

func (f *orderAuth) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *orderAuth) RoleAdd(_ context.Context, name string) (*clientv3.AuthRoleAddResponse, error) {
	f.mu.Lock()
	f.roles[name] = true
	f.mu.Unlock()
	f.record("add-role " + name)
	return &clientv3.AuthRoleAddResponse{}, nil
}

func (f *orderAuth) UserAddWithOptions(_ context.Context, name, _ string, _ *clientv3.UserAddOptions) (*clientv3.AuthUserAddResponse, error) {
	f.mu.Lock()
	f.users[name] = true
	f.mu.Unlock()
	f.record("add-user " + name)
	return &clientv3.AuthUserAddResponse{}, nil
}

func (f *orderAuth) RoleGrantPermission(_ context.Context, role, key, end string, _ clientv3.PermissionType) (*clientv3.AuthRoleGrantPermissionResponse, error) {
	f.mu.Lock()
	ok := f.roles[role]
	f.mu.Unlock()
	if !ok {
		return nil, errNotAdded
	}
	f.record("grant " + role + " " + key + " " + end)
	return &clientv3.AuthRoleGrantPermissionResponse{}, nil
}

func (f *orderAuth) RoleRevokePermission(_ context.Context, role, key, end string) (*clientv3.AuthRoleRevokePermissionResponse, error) {
	f.record("revoke " + role + " " + key + " " + end)
	return &clientv3.AuthRoleRevokePermissionResponse{}, nil
}

func (f *orderAuth) UserGrantRole(_ context.Context, user, role string) (*clientv3.AuthUserGrantRoleResponse, error) {
	f.mu.Lock()
	ok := f.users[user] && f.roles[role]
	f.mu.Unlock()
	if !ok {
		return nil, errNotAdded
	}
	f.record("grant-role " + role + " " + user)
	return &clientv3.AuthUserGrantRoleResponse{}, nil
}

type notAdded struct{}

func (notAdded) Error() string { return "role or user not added yet" }

var errNotAdded = notAdded{}

// TestApplyAddsBeforeGrantsAndKeepsOrderPerPermission: every grant finds
// its role and user made, all of a plan's changes happen, and two changes
// to the same permission run in the order given.
func TestApplyAddsBeforeGrantsAndKeepsOrderPerPermission(t *testing.T) {
	nodes := []rbac.NodeIdentity{{Name: "cp-1", Roles: []api.Role{api.RoleControlPlane, api.RoleHypervisor}}}
	changes := rbac.Plan(store.DefaultPrefix, nodes, rbac.State{})
	role := rbac.NodeRole("cp-1")
	same := rbac.Perm{Type: rbac.Read, Key: "/same"}
	changes = append(changes,
		rbac.Change{Op: rbac.RevokePermission, Role: role, Perm: same},
		rbac.Change{Op: rbac.GrantPermission, Role: role, Perm: same},
		rbac.Change{Op: rbac.RevokePermission, Role: role, Perm: same})
	for range 20 {
		f := &orderAuth{roles: map[string]bool{}, users: map[string]bool{}}
		if err := rbac.Apply(context.Background(), f, changes); err != nil {
			t.Fatalf("apply: %v", err)
		}
		if len(f.calls) != len(changes) {
			t.Fatalf("%d calls for %d changes: %v", len(f.calls), len(changes), f.calls)
		}
		var onSame []string
		for _, c := range f.calls {
			if c == "revoke "+role+" /same " || c == "grant "+role+" /same " {
				onSame = append(onSame, c[:6])
			}
		}
		if got := len(onSame); got != 3 || onSame[0] != "revoke" || onSame[1] != "grant " || onSame[2] != "revoke" {
			t.Fatalf("changes to one permission out of order: %q", onSame)
		}
	}
}
