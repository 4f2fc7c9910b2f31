package rbac

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
)

const P = "/nico/v1/"

// allows tells whether perms let their holder do t on key.
func allows(perms []Perm, key string, t PermType) bool {
	for _, p := range perms {
		if p.Type != t && p.Type != ReadWrite {
			continue
		}
		if p.RangeEnd == "" && key == p.Key || p.RangeEnd != "" && key >= p.Key && key < p.RangeEnd {
			return true
		}
	}
	return false
}

func TestNodePermsReachExactlyTheNodesKeys(t *testing.T) {
	worker := NodePerms(P, "a", []api.Role{api.RoleWorker})
	hv := NodePerms(P, "a", []api.Role{api.RoleWorker, api.RoleHypervisor})
	tests := []struct {
		perms       []Perm
		key         string
		read, write bool
	}{
		{worker, P + "nodes/a", true, true},
		{worker, P + "heartbeats/a", true, true},
		{worker, P + "joins/a", true, true},
		{worker, P + "removals/a", true, true},
		{worker, P + "nixosconfigs/a", true, true},
		{worker, P + "componentreports/a", true, true},
		{worker, P + "componentreports/b", true, false},
		{worker, P + "nodes/b", true, false},
		{worker, P + "nodes/ab", true, false},
		{worker, P + "nodes/", true, false},
		{worker, P + "heartbeats/b", true, false},
		{worker, P + "nixosconfigs/b", true, false},
		{worker, P + "active-op", true, false},
		{worker, P + "ops/x", true, false},
		{worker, P + "election/x", true, false},
		{worker, P + "liveness", true, false},
		{worker, P + "gossip-key", true, false},
		{worker, P + "zzz", true, false},
		{worker, P + "machines/m-0", true, false},
		{worker, P + "hypervisors/a", true, false},
		{worker, P + "secrets/", false, false},
		{worker, P + "secrets/tokens/abcdef", false, false},
		{worker, P + "secrets/nodes/b/kubeconfig", false, false},
		{worker, P + "secrets/nodes/a", false, false},
		{worker, P + "secrets/nodes/a/kubeconfig", true, false},
		{worker, P + "secrets0", true, false}, // right after the secrets range; no nico key
		{worker, "/nico/v1", false, false},
		{worker, "/nico/v2/nodes/a", false, false},
		{worker, "/other", false, false},
		{hv, P + "hypervisors/a", true, true},
		{hv, P + "hypervisors/b", true, false},
		{hv, P + "machines/m-0", true, true},
		{hv, P + "machinesx", true, false},
		{hv, P + "secrets/tokens/abcdef", false, false},
	}
	for _, tt := range tests {
		if got := allows(tt.perms, tt.key, Read); got != tt.read {
			t.Errorf("read %s: %v, want %v", tt.key, got, tt.read)
		}
		if got := allows(tt.perms, tt.key, Write); got != tt.write {
			t.Errorf("write %s: %v, want %v", tt.key, got, tt.write)
		}
	}
}

func TestPlan(t *testing.T) {
	worker := NodeIdentity{Name: "a", Roles: []api.Role{api.RoleWorker}}
	hv := NodeIdentity{Name: "a", Roles: []api.Role{api.RoleWorker, api.RoleHypervisor}}
	cp := NodeIdentity{Name: "cp-1", Roles: []api.Role{api.RoleControlPlane}}
	applied := func(nodes ...NodeIdentity) State { return Want(P, nodes) }
	with := func(s State, f func(State)) State {
		c := State{Roles: map[string][]Perm{}, Users: map[string][]string{}}
		for k, v := range s.Roles {
			c.Roles[k] = slices.Clone(v)
		}
		for k, v := range s.Users {
			c.Users[k] = slices.Clone(v)
		}
		f(c)
		return c
	}
	tests := []struct {
		name     string
		nodes    []NodeIdentity
		existing State
		want     []string // Change.String() of each change, in order
	}{
		{"applied: nothing to do", []NodeIdentity{worker, cp}, applied(worker, cp), nil},
		{"no nodes on an empty etcd: root and the coordinator", nil, State{}, []string{
			"add role root",
			"add user nico-coordinator", "grant-role root to nico-coordinator",
			"add user root", "grant-role root to root",
		}},
		{"a new worker beside the applied rest", []NodeIdentity{cp, worker}, applied(cp), []string{
			"add role node:a",
			`grant-permission READ ["/nico/v1/", "/nico/v1/secrets/") on node:a`,
			`grant-permission READWRITE "/nico/v1/componentreports/a" on node:a`,
			`grant-permission READWRITE "/nico/v1/heartbeats/a" on node:a`,
			`grant-permission READWRITE "/nico/v1/joins/a" on node:a`,
			`grant-permission READWRITE "/nico/v1/nixosconfigs/a" on node:a`,
			`grant-permission READWRITE "/nico/v1/nodes/a" on node:a`,
			`grant-permission READWRITE "/nico/v1/removals/a" on node:a`,
			`grant-permission READ ["/nico/v1/secrets/nodes/a/", "/nico/v1/secrets/nodes/a0") on node:a`,
			`grant-permission READ ["/nico/v1/secrets0", "/nico/v10") on node:a`,
			"add user node:a", "grant-role node:a to node:a",
		}},
		{"a control-plane node's user is also root", []NodeIdentity{cp}, with(applied(cp), func(s State) { s.Users["node:cp-1"] = []string{"node:cp-1"} }), []string{
			"grant-role root to node:cp-1",
		}},
		{"a worker's user loses root", []NodeIdentity{worker}, with(applied(worker), func(s State) { s.Users["node:a"] = []string{"root", "node:a"} }), []string{
			"revoke-role root from node:a",
		}},
		{"a host that is no longer a hypervisor loses machines/", []NodeIdentity{worker}, applied(hv), []string{
			`revoke-permission READWRITE "/nico/v1/hypervisors/a" on node:a`,
			`revoke-permission READWRITE ["/nico/v1/machines/", "/nico/v1/machines0") on node:a`,
		}},
		{"a new hypervisor gains machines/", []NodeIdentity{hv}, applied(worker), []string{
			`grant-permission READWRITE "/nico/v1/hypervisors/a" on node:a`,
			`grant-permission READWRITE ["/nico/v1/machines/", "/nico/v1/machines0") on node:a`,
		}},
		{"a permission of the wrong type is granted again, not revoked", []NodeIdentity{worker}, with(applied(worker), func(s State) {
			for i, p := range s.Roles["node:a"] {
				if p.Key == P+"nodes/a" {
					s.Roles["node:a"][i].Type = Read
				}
			}
		}), []string{`grant-permission READWRITE "/nico/v1/nodes/a" on node:a`}},
		{"a stray permission is revoked; others' users and roles and root's extra roles stay", []NodeIdentity{worker}, with(applied(worker), func(s State) {
			s.Roles["node:a"] = append(s.Roles["node:a"], Perm{Type: Read, Key: P + "secrets/tokens/", RangeEnd: P + "secrets/tokens0"})
			s.Roles["backup"] = []Perm{{Type: Read, Key: "/", RangeEnd: "\x00"}}
			s.Users["backup"] = []string{"backup"}
			s.Users["root"] = []string{"root", "backup"}
		}), []string{`revoke-permission READ ["/nico/v1/secrets/tokens/", "/nico/v1/secrets/tokens0") on node:a`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range Plan(P, tt.nodes, tt.existing) {
				got = append(got, c.String())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("plan:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}
}

func TestPlanIsIdempotent(t *testing.T) {
	nodes := []NodeIdentity{{Name: "cp-1", Roles: []api.Role{api.RoleControlPlane, api.RoleWorker}}, {Name: "hv", Roles: []api.Role{api.RoleHypervisor}}, {Name: "w", Roles: []api.Role{api.RoleWorker}}}
	if c := Plan(P, nodes, Want(P, nodes)); len(c) != 0 {
		t.Fatalf("plan over its own result: %v", c)
	}
}
