package integration

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/rbac"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// TestJoinMakesTheNodeRoleAfterTheVoter: a control-plane machine that
// joins makes only its etcd user, with role root, before it files its
// join: when the leader adds its learner, the node's own role does not
// exist yet (eleven auth changes fewer on the way to the voter). Once the
// node is ready its identity is the whole of docs/security.md's: user
// node:<name> with roles node:<name> and root, the role with every
// permission of rbac.NodePerms.
func TestJoinMakesTheNodeRoleAfterTheVoter(t *testing.T) {
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	cfg := f.AgentConfig("cp-2", false)
	if cfg.PKI.Dir == "" {
		t.Skip("plaintext etcd (NICO_ETCDTEST_TLS=0): no identities")
	}
	root := f.Client()
	user, role := pki.NodeIdentity("cp-2"), rbac.NodeRole("cp-2")
	type seen struct {
		userRoles []string
		userErr   error
		roleErr   error
	}
	atAdd := make(chan seen, 1)
	f.StartCoordinator("c-1", func(c *coord) {
		c.C.OnStep = func(s membership.Step) {
			if s.Action != membership.AddLearner || s.Request != "cp-2" {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var v seen
			if u, err := root.UserGet(ctx, user); err != nil {
				v.userErr = err
			} else {
				v.userRoles = u.Roles
			}
			_, v.roleErr = root.RoleGet(ctx, role)
			select {
			case atAdd <- v:
			default:
			}
		}
	})
	n := f.Start(cfg)
	testwait.For(t, 60*time.Second, "cp-2 ready", func() (bool, string) { return n.Agent.Healthy(), "not healthy" })

	var v seen
	select {
	case v = <-atAdd:
	default:
		t.Fatal("no AddLearner step for cp-2 seen")
	}
	if v.userErr != nil || !slices.Contains(v.userRoles, rbac.RootRole) {
		t.Errorf("when its learner was added, user %s: roles %v, err %v; want it with role root", user, v.userRoles, v.userErr)
	}
	if !errors.Is(v.roleErr, rpctypes.ErrRoleNotFound) {
		t.Errorf("when its learner was added, role %s: err %v; want not found (made after the join)", role, v.roleErr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := root.UserGet(ctx, user)
	if err != nil {
		t.Fatalf("user %s once ready: %v", user, err)
	}
	if want := []string{role, rbac.RootRole}; !slices.Equal(slices.Sorted(slices.Values(u.Roles)), slices.Sorted(slices.Values(want))) {
		t.Errorf("user %s once ready: roles %v, want %v", user, u.Roles, want)
	}
	r, err := root.RoleGet(ctx, role)
	if err != nil {
		t.Fatalf("role %s once ready: %v", role, err)
	}
	var have []rbac.Perm
	for _, p := range r.Perm {
		have = append(have, rbac.Perm{Type: rbac.PermType(p.PermType.String()), Key: string(p.Key), RangeEnd: string(p.RangeEnd)})
	}
	for _, p := range rbac.NodePerms(store.DefaultPrefix, "cp-2", []api.Role{api.RoleControlPlane}) {
		if !slices.Contains(have, p) {
			t.Errorf("role %s once ready lacks %s (has %v)", role, p, have)
		}
	}
}
