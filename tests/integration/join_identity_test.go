package integration

import (
	"context"
	"errors"
	"fmt"
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

// TestJoinMakesTheNodeIdentityAfterTheVoter: a control-plane machine that
// joins makes none of its etcd identity before it files its join (it
// talks to etcd as root): when the leader adds its learner, neither the
// node's user nor its role exists (thirteen auth changes fewer on the way
// to the voter). Once the node is ready its identity is the whole of
// docs/security.md's: user node:<name> with roles node:<name> and root,
// the role with every permission of rbac.NodePerms.
func TestJoinMakesTheNodeIdentityAfterTheVoter(t *testing.T) {
	t.Parallel()
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
		c.Observer.OnMembershipStep = func(s membership.Step) {
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
	if !errors.Is(v.userErr, rpctypes.ErrUserNotFound) {
		t.Errorf("when its learner was added, user %s: roles %v, err %v; want not found (made after the join)", user, v.userRoles, v.userErr)
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

// TestControlPlaneJoinsUnderRoot: a control-plane machine that joins
// registers, writes its heartbeat and files its join request under the
// root identity, with no etcd user of its own yet (no auth change on the
// way to MemberAdd); once a voter it has its user with its node role, and
// when it is removed it records its removal and the leader revokes that
// identity, as for any node.
func TestControlPlaneJoinsUnderRoot(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	cfg := f.AgentConfig("cp-2", false)
	if cfg.PKI.Dir == "" {
		t.Skip("plaintext etcd (NICO_ETCDTEST_TLS=0): no identities")
	}
	// No coordinator yet: the join waits where it has filed its request.
	n := f.Start(cfg)
	waitObj[api.JoinRequest](f, 30*time.Second, store.JoinKey("cp-2"), "cp-2's join request", func(*api.JoinRequest) bool { return true })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if resp, err := f.Client().Get(ctx, store.DefaultPrefix+store.HeartbeatKey("cp-2")); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("cp-2's heartbeat with its request: %v, %v", resp, err)
	}
	root := f.Client()
	if _, err := root.UserGet(ctx, pki.NodeIdentity("cp-2")); !errors.Is(err, rpctypes.ErrUserNotFound) {
		t.Fatalf("cp-2's etcd user while its join waits: %v, want not found", err)
	}

	f.StartCoordinator("c-1")
	f.WaitVoters(90*time.Second, "cp-1", "cp-2")
	testwait.For(t, 30*time.Second, "cp-2 ready with its identity", func() (bool, string) {
		u, err := root.UserGet(ctx, pki.NodeIdentity("cp-2"))
		if err != nil {
			return false, err.Error()
		}
		return n.Agent.Healthy() && slices.Contains(u.Roles, rbac.NodeRole("cp-2")), fmt.Sprintf("healthy %v, roles %v", n.Agent.Healthy(), u.Roles)
	})

	f.requestRemoval("cp-2", false)
	n.WaitRemoved(t, 60*time.Second, "removed cp-2 did not stop")
	waitObj[api.Node](f, 10*time.Second, store.NodeKey("cp-2"), "cp-2 marked removed", func(n *api.Node) bool { return n.Status.Phase == api.NodeRemoved })
	waitObj[api.RemoveRequest](f, 30*time.Second, store.RemovalKey("cp-2"), "cp-2's identity revoked", func(r *api.RemoveRequest) bool {
		return r.Status.Phase == api.RemoveDone && !r.Status.IdentityRevokedAt.IsZero()
	})
	if _, err := root.UserGet(ctx, pki.NodeIdentity("cp-2")); !errors.Is(err, rpctypes.ErrUserNotFound) {
		t.Fatalf("etcd user of removed cp-2: %v, want not found", err)
	}
}
