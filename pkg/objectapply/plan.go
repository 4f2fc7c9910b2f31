package objectapply

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/kubeversion"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Write is one object to write in the apply's transaction.
type Write struct {
	Key string
	// Rev is the revision the stored object was read at (0: absent): the
	// transaction holds only while every key is still there.
	Rev int64
	// Obj is what to write (nil: unchanged, only guarded).
	Obj api.Object
	// Delete deletes Key instead.
	Delete bool
	// Msg says what the write does, for people.
	Msg string
	// stored is the object as stored (nil: absent).
	stored api.Object
}

// Options change what Plan accepts.
type Options struct {
	// Force writes over an object the flake declares.
	Force bool
}

// Plan checks every document against what is stored and running and
// returns the writes; a *RefusedError names every refusal, nothing
// written.
func (c *Cluster) Plan(ctx context.Context, docs []*Document, o Options) ([]Write, error) {
	var writes []Write
	var errs []error
	var running []string
	needRunning := false
	for _, d := range docs {
		needRunning = needRunning || (d.kc != nil && d.kc.Spec.Version != "" && d.kc.Spec.Etcd.ProviderOrDefault() == api.EtcdProviderNico)
	}
	if needRunning {
		v, err := c.fleetEtcdVersions(ctx, docs)
		if err != nil {
			return nil, err
		}
		running = v
	}
	n := 0
	for _, d := range docs {
		var w Write
		var err error
		switch {
		case d.ec != nil:
			w, err = c.planEtcdCluster(ctx, d.ec)
			if err == nil {
				err = checkClustersSupport(ctx, c.Store, d.ec.Spec.Version, docs)
			}
		case d.pool != nil:
			w, err = c.planPool(ctx, d.pool)
		case d.kc != nil:
			w, err = c.planKubernetesCluster(ctx, d.kc, running)
		default:
			continue // a manifest's header
		}
		n++
		if err == nil && !o.Force && w.stored != nil {
			err = ownedErr(w.stored)
		}
		var refused *refusal
		switch {
		case errors.As(err, &refused):
			errs = append(errs, fmt.Errorf("%s: %s refused, nothing written:\n%w", d.At, d.Kind, refused.err))
		case err != nil:
			return nil, err
		default:
			writes = append(writes, w)
		}
	}
	if len(errs) > 0 {
		return nil, &RefusedError{nothingWritten(n, errs)}
	}
	return writes, nil
}

// ownedErr refuses a change by people of an object the flake declares.
func ownedErr(obj api.Object) error {
	d := obj.GetMetadata().Declared
	if d == nil {
		return nil
	}
	return &refusal{OwnedError(obj)}
}

// OwnedError says that obj is the flake's and how to change it anyway.
func OwnedError(obj api.Object) error {
	d := obj.GetMetadata().Declared
	return fmt.Errorf("%s %s is declared in the flake (revision %s, applied by %s): change it in services.nico.objects and switch, or pass --force (the flake's next apply writes its spec back; docs/declared-objects.md)",
		obj.GetTypeMeta().Kind, obj.GetMetadata().Name, d.Revision, d.Host)
}

// planEtcdCluster checks ec against the cluster and returns the write of
// its spec over the stored EtcdCluster (keeping its status), or its
// creation. A refusal is a *refusal.
func (c *Cluster) planEtcdCluster(ctx context.Context, ec *api.EtcdCluster) (Write, error) {
	f, err := c.facts(ctx)
	if err != nil {
		return Write{}, err
	}
	if err := checkAgainst(ec.Spec, f); err != nil {
		return Write{}, &refusal{err}
	}
	w := Write{Key: store.EtcdClusterKey}
	step := versionStep(ec.Spec, f)
	if f.stored == nil {
		obj := api.NewEtcdCluster()
		obj.Metadata.CreatedAt = c.now()
		obj.Spec = ec.Spec
		w.Obj, w.Msg = obj, "EtcdCluster etcd created"
	} else {
		w.stored, w.Rev = f.stored, f.stored.Metadata.Revision
		if specsEqual(f.stored.Spec, ec.Spec) {
			w.Msg = "EtcdCluster etcd unchanged"
			return w, nil
		}
		next := *f.stored
		next.Spec = ec.Spec
		w.Obj, w.Msg = &next, "EtcdCluster etcd configured"
	}
	if step != "" {
		w.Msg += "; version: " + step
	}
	return w, nil
}

// planPool returns the write of p's spec over the stored pool (keeping its
// status), or its creation.
func (c *Cluster) planPool(ctx context.Context, p *api.MachinePool) (Write, error) {
	name := p.Metadata.Name
	stored := api.NewMachinePool(name)
	w := Write{Key: store.PoolKey(name)}
	switch err := c.Store.Get(ctx, w.Key, stored); {
	case errors.Is(err, store.ErrNotFound):
		obj := api.NewMachinePool(name)
		obj.Metadata.CreatedAt = c.now()
		obj.Spec = p.Spec
		w.Obj, w.Msg = obj, "MachinePool "+name+" created"
	case err != nil:
		return Write{}, fmt.Errorf("reading machine pool %s: %w", name, err)
	case specsEqual(stored.Spec, p.Spec):
		w.stored, w.Rev, w.Msg = stored, stored.Metadata.Revision, "MachinePool "+name+" unchanged"
	default:
		w.stored, w.Rev = stored, stored.Metadata.Revision
		next := *stored
		next.Spec = p.Spec
		w.Obj, w.Msg = &next, "MachinePool "+name+" configured"
	}
	return w, nil
}

// planKubernetesCluster checks kc against the stored cluster (provider,
// endpoint and version changes, a deletion in progress) and the fleet's
// etcd versions (running), and returns the write: a creation at
// generation 1, or the new spec over the stored object (status kept) at
// the next generation. A refusal is a *refusal.
func (c *Cluster) planKubernetesCluster(ctx context.Context, kc *api.KubernetesCluster, running []string) (Write, error) {
	name := kc.Metadata.Name
	w := Write{Key: store.ClusterKey(name)}
	stored := &api.KubernetesCluster{}
	err := c.Store.Get(ctx, w.Key, stored)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return Write{}, fmt.Errorf("reading KubernetesCluster %s: %w", name, err)
	}
	exists := err == nil
	var errs []error
	if exists {
		if err := api.ValidateUpdate(stored, kc); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, kc.Spec.CheckFleetEtcd(running)...)
	if len(errs) > 0 {
		return Write{}, &refusal{errors.Join(errs...)}
	}
	if !exists {
		obj := api.NewKubernetesCluster(name)
		obj.Metadata.CreatedAt = c.now()
		obj.Spec = kc.Spec
		w.Obj, w.Msg = obj, "KubernetesCluster "+name+" created"
		return w, nil
	}
	w.stored, w.Rev = stored, stored.Metadata.Revision
	if specsEqual(stored.Spec, kc.Spec) {
		w.Msg = "KubernetesCluster " + name + " unchanged"
		return w, nil
	}
	change, _ := api.VersionChange(stored, kc.Spec) // checked by ValidateUpdate
	next := *stored
	next.Spec = kc.Spec
	next.Metadata.Generation++
	w.Obj = &next
	w.Msg = fmt.Sprintf("KubernetesCluster %s configured (generation %d)", name, next.Metadata.Generation)
	if change.Kind != "" && change.Kind != kubeversion.KindNone {
		w.Msg += "; version: " + change.String()
	}
	return w, nil
}

// Commit writes every changed object in one transaction guarded by the
// revision each was read at; store.ErrConflict when one changed.
func Commit(ctx context.Context, st *store.Store, writes []Write) error {
	var cmps []clientv3.Cmp
	var ops []clientv3.Op
	for _, w := range writes {
		cmps = append(cmps, store.Unchanged(w.Key, w.Rev))
		switch {
		case w.Delete:
			ops = append(ops, store.DeleteOp(w.Key))
		case w.Obj != nil:
			op, err := store.PutObjectOp(w.Obj)
			if err != nil {
				return err
			}
			ops = append(ops, op)
		}
	}
	if len(ops) == 0 {
		return nil
	}
	if _, err := st.Txn(ctx, cmps, ops...); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return err
		}
		return fmt.Errorf("writing %s: %w", strings.Join(writtenKeys(writes), ", "), err)
	}
	return nil
}

func writtenKeys(writes []Write) []string {
	var out []string
	for _, w := range writes {
		if w.Obj != nil || w.Delete {
			out = append(out, w.Key)
		}
	}
	return out
}

// Apply checks docs and writes them in one transaction, reading and
// checking again when something changed meanwhile; it returns what each
// write did.
func (c *Cluster) Apply(ctx context.Context, docs []*Document, o Options) ([]string, error) {
	for {
		writes, err := c.Plan(ctx, docs, o)
		if err != nil {
			return nil, err
		}
		if err := Commit(ctx, c.Store, writes); errors.Is(err, store.ErrConflict) {
			continue
		} else if err != nil {
			return nil, err
		}
		return messages(writes), nil
	}
}

func messages(writes []Write) []string {
	out := make([]string, 0, len(writes))
	for _, w := range writes {
		out = append(out, w.Msg)
	}
	return out
}

// specsEqual compares two specs by their JSON form (nil and empty lists
// alike).
func specsEqual(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
