package kubetest

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// GrantPrefix makes etcd user (a client certificate's Common Name, no
// password) with a role of the same name that reads and writes the keys
// under prefix and nothing else. It is idempotent. prefix should end in
// "/": "/clusters/a/registry/" does not reach "/clusters/a/registry2".
func GrantPrefix(ctx context.Context, auth clientv3.Auth, user, prefix string) error {
	if user == "" || prefix == "" {
		return fmt.Errorf("kubetest: etcd identity: user %q, prefix %q: want both", user, prefix)
	}
	if _, err := auth.RoleAdd(ctx, user); err != nil && !errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
		return fmt.Errorf("kubetest: add role %s: %w", user, err)
	}
	if _, err := auth.RoleGrantPermission(ctx, user, prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
		return fmt.Errorf("kubetest: grant %s %s: %w", user, prefix, err)
	}
	if _, err := auth.UserAddWithOptions(ctx, user, "", &clientv3.UserAddOptions{NoPassword: true}); err != nil && !errors.Is(err, rpctypes.ErrUserAlreadyExist) {
		return fmt.Errorf("kubetest: add user %s: %w", user, err)
	}
	if _, err := auth.UserGrantRole(ctx, user, user); err != nil {
		return fmt.Errorf("kubetest: grant role %s to %s: %w", user, user, err)
	}
	return nil
}
