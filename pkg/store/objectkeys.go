package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/homystack/nico/pkg/api"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNoKey is returned by KeyOf for an object whose kind has no place in
// the keyspace or whose name cannot be a key's last element.
var ErrNoKey = errors.New("store: object has no key")

// keyOfKind maps every stored kind to the key of its object named name.
// Singletons (the liveness record, the gossip key) ignore the name.
var keyOfKind = map[string]func(name string) string{
	api.KindNode:               NodeKey,
	api.KindJoinRequest:        JoinKey,
	api.KindRemoveRequest:      RemovalKey,
	api.KindOperation:          OpKey,
	api.KindMachine:            MachineKey,
	api.KindMachinePool:        PoolKey,
	api.KindHypervisor:         HypervisorKey,
	api.KindMachineClaim:       MachineClaimKey,
	api.KindNixosConfiguration: NixosConfigKey,
	api.KindRollout:            RolloutKey,
	api.KindToken:              TokenKey,
	api.KindGossipSecret:       NodeGossipSecretKey,
	api.KindGossipKey:          func(string) string { return GossipKeyKey },
	api.KindLiveness:           func(string) string { return LivenessKey },
	api.KindEtcdCluster:        func(string) string { return EtcdClusterKey },
	api.KindNodeEtcdVersion:    NodeEtcdVersionKey,
	api.KindKubernetesCluster:  ClusterKey,
	api.KindSecret:             NamedSecretKey,
	api.KindNodeSecrets:        NodeNamedSecretsKey,
	api.KindComponentReport:    ComponentReportKey,
	api.KindDrainRequest:       DrainRequestKey,
	api.KindSwitchRequest:      SwitchKey,
	api.KindKubeconfigReport:   KubeconfigReportKey,
	api.KindSnapshotDrill:      func(string) string { return SnapshotDrillKey },
	api.KindClusterLineage:     func(string) string { return ClusterLineageKey },
	api.KindFlakeObjects:       func(string) string { return FlakeObjectsKey },
}

// FlakeObjectsKey is the record of the flake's objects applied last
// (api.FlakeObjects).
const FlakeObjectsKey = "flake-objects"

// KeyOf returns where obj lives, from its kind and name: the one mapping
// from objects to keys, so that no caller builds an object's key by hand.
func KeyOf(obj api.Object) (string, error) {
	kind := obj.GetTypeMeta().Kind
	key, ok := keyOfKind[kind]
	if !ok {
		return "", fmt.Errorf("%w: kind %q is not stored (known kinds: %s)", ErrNoKey, kind, strings.Join(Kinds(), ", "))
	}
	name := obj.GetMetadata().Name
	if name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("%w: %s name %q: must be non-empty and have no \"/\"", ErrNoKey, kind, name)
	}
	return key(name), nil
}

// Kinds returns the stored kinds, sorted.
func Kinds() []string {
	out := make([]string, 0, len(keyOfKind))
	for k := range keyOfKind {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// PutObjectOp is PutOp at obj's own key (KeyOf).
func PutObjectOp(obj api.Object, opts ...clientv3.OpOption) (clientv3.Op, error) {
	key, err := KeyOf(obj)
	if err != nil {
		return clientv3.Op{}, err
	}
	return PutOp(key, obj, opts...)
}

// DeleteObjectOp deletes obj's own key in a transaction.
func DeleteObjectOp(obj api.Object) (clientv3.Op, error) {
	key, err := KeyOf(obj)
	if err != nil {
		return clientv3.Op{}, err
	}
	return clientv3.OpDelete(key), nil
}

// UnchangedGuard is the guard of a compare-and-swap of obj in a fenced
// transaction: it holds while obj's key is still at the revision obj was
// read at (revision 0: still absent), and fails with ErrConflict naming
// the key.
func UnchangedGuard(obj api.Object) (Guard, error) {
	key, err := KeyOf(obj)
	if err != nil {
		return Guard{}, err
	}
	return Guard{Cmp: Unchanged(key, obj.GetMetadata().Revision), Err: fmt.Errorf("%w: %s", ErrConflict, key)}, nil
}

// CreateObject is Create at obj's own key.
func (s *Store) CreateObject(ctx context.Context, obj api.Object, opts ...clientv3.OpOption) error {
	key, err := KeyOf(obj)
	if err != nil {
		return err
	}
	return s.Create(ctx, key, obj, opts...)
}

// UpdateObject is Update at obj's own key.
func (s *Store) UpdateObject(ctx context.Context, obj api.Object) error {
	key, err := KeyOf(obj)
	if err != nil {
		return err
	}
	return s.Update(ctx, key, obj)
}

// PutObject is Put at obj's own key.
func (s *Store) PutObject(ctx context.Context, obj api.Object, opts ...clientv3.OpOption) error {
	key, err := KeyOf(obj)
	if err != nil {
		return err
	}
	return s.Put(ctx, key, obj, opts...)
}
