package restore

import (
	"context"
	"errors"
	"fmt"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrBusy is returned when the one-change-in-flight slot holds another
// operation.
var ErrBusy = errors.New("restore: another operation is in flight")

// operation is j as the Operation journaled in the new cluster.
func operation(j *Journal) *api.Operation {
	op := api.NewOperation(j.ID)
	op.Metadata.CreatedAt = j.StartedAt
	op.Spec = api.OperationSpec{Type: api.OpType(j.Kind), Node: j.Target, StartedBy: "nicoctl"}
	op.Status.Phase = api.OpRunning
	if j.Step == StepDone {
		op.Status.Phase = api.OpSucceeded
	}
	op.Status.Step = api.OpStep(j.Step)
	op.Status.UpdatedAt = j.UpdatedAt
	op.Status.StepSince = j.UpdatedAt
	msg := ""
	if n := len(j.History); n > 0 {
		msg = j.History[n-1]
	}
	op.Status.Message = msg
	return op
}

func openStore(ctx context.Context, f Fleet, prefix string) (*store.Store, func(), error) {
	cli, err := f.Client(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("client of the new cluster: %w", err)
	}
	st, err := store.New(cli, prefix)
	if err != nil {
		cli.Close()
		return nil, nil, err
	}
	return st, func() { cli.Close() }, nil
}

// takeSlot copies j into the new cluster and makes it the operation in
// flight; a restored cluster's ClusterLineage becomes j's. The snapshot may hold an operation that was in flight when it was
// taken, join and removal requests of the old members and the old leader's
// election key: that operation is marked failed (superseded), the rest
// deleted, so the coordinator resumes nothing of the old cluster.
func takeSlot(ctx context.Context, f Fleet, prefix string, j *Journal) error {
	st, done, err := openStore(ctx, f, prefix)
	if err != nil {
		return err
	}
	defer done()
	return takeSlotIn(ctx, st, j)
}

// takeSlotIn is takeSlot through st.
func takeSlotIn(ctx context.Context, st *store.Store, j *Journal) error {
	old, err := st.ActiveOp(ctx)
	if err != nil {
		return err
	}
	var ops []clientv3.Op
	if old != nil && old.Metadata.Name != j.ID {
		old.Status.Phase = api.OpFailed
		old.Record(j.UpdatedAt, "nicoctl", "superseded by "+j.ID)
		put, err := store.PutObjectOp(old)
		if err != nil {
			return err
		}
		ops = append(ops, put)
	}
	put, err := store.PutObjectOp(operation(j))
	if err != nil {
		return err
	}
	ops = append(ops, put)
	if j.Kind == KindRestore {
		// A recovery keeps its survivor's cluster (and lineage).
		lineage, err := lineageOp(j)
		if err != nil {
			return err
		}
		ops = append(ops, lineage)
	}
	ops = append(ops,
		store.PutValueOp(store.ActiveOpKey, j.ID),
		store.DeleteDirOp(store.JoinsDir),
		// The snapshot's election keys would let a coordinator elected in
		// the old cluster pass its fence (the key's create revision) in
		// the new one: every candidate campaigns again.
		store.DeleteDirOp(store.ElectionPrefix),
		store.DeleteDirOp(store.RemovalsDir))
	if _, err := st.Txn(ctx, nil, ops...); err != nil {
		return fmt.Errorf("journal %s in the new cluster: %w", j.ID, err)
	}
	return nil
}

// writeOp updates j's Operation in the new cluster.
func writeOp(ctx context.Context, f Fleet, prefix string, j *Journal) error {
	st, done, err := openStore(ctx, f, prefix)
	if err != nil {
		return err
	}
	defer done()
	if err := st.Put(ctx, store.OpKey(j.ID), operation(j)); err != nil {
		return fmt.Errorf("journal %s: %w", j.ID, err)
	}
	return nil
}

// releaseSlot marks j succeeded, records the new cluster as the one the
// coordinators act on (store.ClusterIDKey: until then the restored data
// names the old one, which holds them off) and frees the slot if it still
// holds j.
func releaseSlot(ctx context.Context, f Fleet, prefix string, j *Journal) error {
	st, done, err := openStore(ctx, f, prefix)
	if err != nil {
		return err
	}
	defer done()
	fin := *j
	fin.Step = StepDone
	put, err := store.PutObjectOp(operation(&fin))
	if err != nil {
		return err
	}
	_, err = st.Txn(ctx, []clientv3.Cmp{store.ValueIs(store.ActiveOpKey, j.ID)},
		put, store.RecordClusterIDOp(j.NewClusterID), store.DeleteOp(store.ActiveOpKey))
	if err != nil {
		return fmt.Errorf("release the slot of %s: %w", j.ID, err)
	}
	return nil
}

// ReserveSlot takes the one-change-in-flight slot of the live (old)
// cluster for j before anything is stopped, so that no coordinator starts a
// membership change meanwhile; it fails with ErrBusy, naming the operation,
// when another holds it. cli is a client of the old cluster.
func ReserveSlot(ctx context.Context, cli *clientv3.Client, prefix string, j *Journal) error {
	st, err := store.New(cli, prefix)
	if err != nil {
		return err
	}
	put, err := store.PutObjectOp(operation(j))
	if err != nil {
		return err
	}
	_, err = st.Txn(ctx, []clientv3.Cmp{store.Absent(store.ActiveOpKey)}, put, store.PutValueOp(store.ActiveOpKey, j.ID))
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("restore: reserve the slot: %w", err)
	}
	if err != nil {
		name, typ := "?", api.OpType("unknown type")
		if kv, kerr := st.GetKV(ctx, store.ActiveOpKey); kerr == nil && kv != nil {
			name = string(kv.Value)
		}
		if cur, cerr := st.ActiveOp(ctx); cerr == nil && cur != nil {
			typ = cur.Spec.Type
		}
		if name == j.ID {
			return nil
		}
		return fmt.Errorf("%w: %s (%s) holds it; wait for it to end", ErrBusy, name, typ)
	}
	return nil
}

// ReleaseLive frees the live (old) cluster's slot if it still holds j,
// journaling j's Operation there as failed with reason.
func ReleaseLive(ctx context.Context, cli *clientv3.Client, prefix string, j *Journal, reason string) error {
	st, err := store.New(cli, prefix)
	if err != nil {
		return err
	}
	op := operation(j)
	op.Status.Phase = api.OpFailed
	op.Record(j.UpdatedAt, "nicoctl", reason)
	put, err := store.PutObjectOp(op)
	if err != nil {
		return err
	}
	_, err = st.Txn(ctx, []clientv3.Cmp{store.ValueIs(store.ActiveOpKey, j.ID)}, put, store.DeleteOp(store.ActiveOpKey))
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("restore: release the live slot of %s: %w", j.ID, err)
	}
	return nil
}
