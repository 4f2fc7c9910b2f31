package rbac

import (
	"fmt"
	"slices"
	"sort"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// RootRole is etcd's built-in administrator role.
const RootRole = "root"

// NodeIdentity is a node whose etcd user and role Plan derives.
type NodeIdentity struct {
	Name  string
	Roles []api.Role
}

// PermType is what a permission allows.
type PermType string

// Permission types, as etcd names them.
const (
	Read      PermType = "READ"
	Write     PermType = "WRITE"
	ReadWrite PermType = "READWRITE"
)

// Perm allows Type on the key Key (RangeEnd empty) or on [Key, RangeEnd).
type Perm struct {
	Type     PermType
	Key      string
	RangeEnd string
}

func (p Perm) String() string {
	if p.RangeEnd == "" {
		return fmt.Sprintf("%s %q", p.Type, p.Key)
	}
	return fmt.Sprintf("%s [%q, %q)", p.Type, p.Key, p.RangeEnd)
}

// State is etcd's users and roles, or the part of them a plan looks at.
type State struct {
	Roles map[string][]Perm   // role name to its permissions
	Users map[string][]string // user name to its roles
}

// Op is a kind of change.
type Op string

// Changes, in the order Plan returns them.
const (
	AddRole          Op = "add-role"
	GrantPermission  Op = "grant-permission"
	RevokePermission Op = "revoke-permission"
	AddUser          Op = "add-user"
	GrantRole        Op = "grant-role"
	RevokeRole       Op = "revoke-role"
)

// Change is one call of etcd's Auth API.
type Change struct {
	Op   Op
	Role string
	User string // AddUser, GrantRole, RevokeRole
	Perm Perm   // GrantPermission, RevokePermission
}

func (c Change) String() string {
	switch c.Op {
	case AddRole:
		return fmt.Sprintf("add role %s", c.Role)
	case GrantPermission, RevokePermission:
		return fmt.Sprintf("%s %s on %s", c.Op, c.Perm, c.Role)
	case AddUser:
		return fmt.Sprintf("add user %s", c.User)
	case RevokeRole:
		return fmt.Sprintf("%s %s from %s", c.Op, c.Role, c.User)
	default:
		return fmt.Sprintf("%s %s to %s", c.Op, c.Role, c.User)
	}
}

// NodeRole is the etcd role (and user) of node name.
func NodeRole(name string) string { return pki.NodeIdentity(name) }

// NodePerms are the permissions of role node:<name> under prefix.
func NodePerms(prefix, name string, roles []api.Role) []Perm {
	secrets := prefix + store.SecretsDir
	perms := []Perm{
		{Type: Read, Key: prefix, RangeEnd: secrets},
		{Type: Read, Key: clientv3.GetPrefixRangeEnd(secrets), RangeEnd: clientv3.GetPrefixRangeEnd(prefix)},
		prefixPerm(Read, NodeSecretsDir(prefix, name)),
	}
	for _, k := range []string{store.NodeKey(name), store.HeartbeatKey(name), store.JoinKey(name), store.RemovalKey(name), store.NixosConfigKey(name), store.ComponentReportKey(name)} {
		perms = append(perms, Perm{Type: ReadWrite, Key: prefix + k})
	}
	if slices.Contains(roles, api.RoleHypervisor) {
		perms = append(perms, Perm{Type: ReadWrite, Key: prefix + store.HypervisorKey(name)}, prefixPerm(ReadWrite, prefix+store.MachinesDir))
	}
	sortPerms(perms)
	return perms
}

// NodeSecretsDir is where node name's own secrets live (full key).
func NodeSecretsDir(prefix, name string) string {
	return prefix + store.NodeSecretsDir(name)
}

func prefixPerm(t PermType, key string) Perm {
	return Perm{Type: t, Key: key, RangeEnd: clientv3.GetPrefixRangeEnd(key)}
}

// Want is the users and roles nico needs for nodes under prefix: root and
// nico-coordinator with role root, and each node's user and role.
func Want(prefix string, nodes []NodeIdentity) State {
	w := State{
		Roles: map[string][]Perm{RootRole: nil},
		Users: map[string][]string{pki.RootIdentity: {RootRole}, pki.CoordinatorIdentity: {RootRole}},
	}
	for _, n := range nodes {
		r := NodeRole(n.Name)
		w.Roles[r] = NodePerms(prefix, n.Name, n.Roles)
		w.Users[r] = []string{r}
		if slices.Contains(n.Roles, api.RoleControlPlane) {
			w.Users[r] = []string{r, RootRole}
		}
	}
	return w
}

// Plan returns the changes that make existing hold the users and roles of
// Want(prefix, nodes). It never deletes a user or role; it revokes
// permissions and roles that a node's role and user have beyond what they
// should (a hypervisor that no longer is one, a control-plane node
// demoted). Other users and roles are left alone.
func Plan(prefix string, nodes []NodeIdentity, existing State) []Change {
	want := Want(prefix, nodes)
	var roles, users []Change
	for _, name := range sortedKeys(want.Roles) {
		have, ok := existing.Roles[name]
		if !ok {
			roles = append(roles, Change{Op: AddRole, Role: name})
		}
		if name == RootRole {
			continue // etcd's root role needs no permission
		}
		for _, p := range want.Roles[name] {
			if !slices.Contains(have, p) {
				roles = append(roles, Change{Op: GrantPermission, Role: name, Perm: p})
			}
		}
		for _, p := range sortedPerms(have) {
			if !slices.ContainsFunc(want.Roles[name], func(q Perm) bool { return q.Key == p.Key && q.RangeEnd == p.RangeEnd }) {
				roles = append(roles, Change{Op: RevokePermission, Role: name, Perm: p})
			}
		}
	}
	for _, name := range sortedKeys(want.Users) {
		have, ok := existing.Users[name]
		if !ok {
			users = append(users, Change{Op: AddUser, User: name})
		}
		for _, r := range want.Users[name] {
			if !slices.Contains(have, r) {
				users = append(users, Change{Op: GrantRole, User: name, Role: r})
			}
		}
		if name == pki.RootIdentity || name == pki.CoordinatorIdentity {
			continue // extra roles granted by hand are not nico's to take
		}
		for _, r := range slices.Sorted(slices.Values(have)) {
			if !slices.Contains(want.Users[name], r) {
				users = append(users, Change{Op: RevokeRole, User: name, Role: r})
			}
		}
	}
	return append(roles, users...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedPerms(ps []Perm) []Perm {
	out := slices.Clone(ps)
	sortPerms(out)
	return out
}

func sortPerms(ps []Perm) {
	slices.SortFunc(ps, func(a, b Perm) int {
		if a.Key != b.Key {
			if a.Key < b.Key {
				return -1
			}
			return 1
		}
		if a.RangeEnd != b.RangeEnd {
			if a.RangeEnd < b.RangeEnd {
				return -1
			}
			return 1
		}
		return 0
	})
}
