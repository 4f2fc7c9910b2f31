package objectapply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// FlakeResult is what ApplyFlake did.
type FlakeResult struct {
	Decision Decision
	// Messages say what each write did (none when superseded).
	Messages []string
}

// ApplyFlake applies a manifest the NixOS module rendered (a FlakeObjects
// header, then the objects) as host's agent does: through Plan's checks,
// with Decide's order, the flake's marks on its objects, the removal of
// those it no longer declares and the FlakeObjects record, all in one
// transaction. A refused manifest writes nothing (*RefusedError, or
// *InvalidError from Decode).
func (c *Cluster) ApplyFlake(ctx context.Context, docs []*Document, host string) (FlakeResult, error) {
	m, objs, err := manifestOf(docs)
	if err != nil {
		return FlakeResult{}, err
	}
	for {
		writes, res, err := c.planFlake(ctx, m, objs, host)
		if err != nil || res.Decision.Verdict != Apply {
			return res, err
		}
		if err := Commit(ctx, c.Store, writes); errors.Is(err, store.ErrConflict) {
			continue
		} else if err != nil {
			return FlakeResult{}, err
		}
		return res, nil
	}
}

// manifestOf finds the header (exactly one) and computes its digest and
// the flake's specs; docs must be decoded.
func manifestOf(docs []*Document) (*api.FlakeObjects, []*Document, error) {
	var m *api.FlakeObjects
	var objs []*Document
	for _, d := range docs {
		if d.flake == nil {
			objs = append(objs, d)
			continue
		}
		if m != nil {
			return nil, nil, &InvalidError{fmt.Errorf("%s: a manifest has one %s document", d.At, api.KindFlakeObjects)}
		}
		m = d.flake
	}
	if m == nil {
		return nil, nil, &InvalidError{fmt.Errorf("not a manifest of the flake's objects: no %s document (services.nico.objects renders one)", api.KindFlakeObjects)}
	}
	next := *m
	next.Status = api.FlakeObjectsStatus{}
	for _, d := range objs {
		spec, err := json.Marshal(d.spec())
		if err != nil {
			return nil, nil, err
		}
		next.Status.Objects = append(next.Status.Objects, api.DeclaredObject{Kind: d.Kind, Name: d.Name(), Spec: spec})
	}
	sort.Slice(next.Status.Objects, func(i, j int) bool {
		a, b := next.Status.Objects[i], next.Status.Objects[j]
		return a.Kind+"/"+a.Name < b.Kind+"/"+b.Name
	})
	b, err := json.Marshal(struct {
		Removal string               `json:"removal"`
		Objects []api.DeclaredObject `json:"objects"`
	}{next.Spec.KubernetesClusterRemoval, next.Status.Objects})
	if err != nil {
		return nil, nil, err
	}
	sum := sha256.Sum256(b)
	next.Status.Digest = hex.EncodeToString(sum[:])
	return &next, objs, nil
}

// planFlake reads the record, decides, and plans the writes.
func (c *Cluster) planFlake(ctx context.Context, m *api.FlakeObjects, objs []*Document, host string) ([]Write, FlakeResult, error) {
	record := api.NewFlakeObjects()
	recW := Write{Key: store.FlakeObjectsKey}
	var last *api.FlakeObjects
	switch err := c.Store.Get(ctx, recW.Key, record); {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, FlakeResult{}, fmt.Errorf("reading the record of the flake's objects: %w", err)
	default:
		last, recW.Rev = record, record.Metadata.Revision
	}
	res := FlakeResult{Decision: Decide(last, m, host)}
	switch res.Decision.Verdict {
	case Superseded:
		return nil, res, nil
	case Conflict:
		return nil, res, &RefusedError{errors.New(res.Decision.Reason)}
	}
	writes, err := c.Plan(ctx, objs, Options{Force: true})
	if err != nil {
		return nil, res, err
	}
	mark := &api.Declaration{Revision: m.Spec.Revision, Host: host}
	for i := range writes {
		w := &writes[i]
		if w.Obj == nil && w.stored != nil && !sameMark(w.stored, mark) {
			w.Obj = w.stored
			w.Msg += "; marked as the flake's, revision " + mark.Revision
		}
		if w.Obj != nil && !sameMark(w.Obj, mark) {
			d := *mark
			w.Obj.GetMetadata().Declared = &d
		}
	}
	removals, err := c.planRemovals(ctx, m, objs)
	if err != nil {
		return nil, res, err
	}
	writes = append(writes, removals...)
	if last == nil || last.Status.Digest != m.Status.Digest || CompareOrder(last.Spec, m.Spec) != 0 {
		rec := api.NewFlakeObjects()
		if last != nil {
			rec.Metadata = last.Metadata
		} else {
			rec.Metadata.CreatedAt = c.now()
		}
		rec.Spec = m.Spec
		rec.Status = m.Status
		rec.Status.Host, rec.Status.AppliedAt = host, c.now()
		recW.Obj = rec
		recW.Msg = fmt.Sprintf("FlakeObjects recorded: revision %s (lastModified %d), %d objects, applied by %s", m.Spec.Revision, m.Spec.LastModified, len(m.Status.Objects), host)
	} else {
		recW.Msg = "FlakeObjects unchanged: revision " + m.Spec.Revision
	}
	writes = append(writes, recW)
	res.Messages = messages(writes)
	return writes, res, nil
}

// sameMark tells whether obj carries the flake's mark of this revision
// (whichever host applied it).
func sameMark(obj api.Object, mark *api.Declaration) bool {
	d := obj.GetMetadata().Declared
	return d != nil && d.Revision == mark.Revision
}

// planRemovals are the writes for the objects the flake marked and no
// longer declares (RemovalOf).
func (c *Cluster) planRemovals(ctx context.Context, m *api.FlakeObjects, objs []*Document) ([]Write, error) {
	declared := map[string]bool{}
	for _, d := range objs {
		declared[d.Kind+"/"+d.Name()] = true
	}
	stored, err := c.declaredObjects(ctx)
	if err != nil {
		return nil, err
	}
	var writes []Write
	for _, obj := range stored {
		kind, name := obj.GetTypeMeta().Kind, obj.GetMetadata().Name
		if declared[kind+"/"+name] {
			continue
		}
		key, err := store.KeyOf(obj)
		if err != nil {
			return nil, err
		}
		w := Write{Key: key, Rev: obj.GetMetadata().Revision}
		switch RemovalOf(kind, m.Spec.KubernetesClusterRemoval) {
		case Delete:
			w.Delete, w.Msg = true, fmt.Sprintf("%s %s deleted: the flake no longer declares it", kind, name)
		case Release:
			obj.GetMetadata().Declared = nil
			w.Obj, w.Msg = obj, fmt.Sprintf("%s %s released: the flake no longer declares it; it keeps its spec", kind, name)
		case MarkDeletion:
			md := obj.GetMetadata()
			md.Declared = nil
			if md.DeletionTimestamp == nil {
				now := c.now()
				md.DeletionTimestamp = &now
			}
			w.Obj, w.Msg = obj, fmt.Sprintf("%s %s marked for deletion: the flake no longer declares it (kubernetesClusterRemoval delete)", kind, name)
		}
		writes = append(writes, w)
	}
	return writes, nil
}

// declaredObjects are the stored objects that carry the flake's mark.
func (c *Cluster) declaredObjects(ctx context.Context) ([]api.Object, error) {
	var out []api.Object
	ec := &api.EtcdCluster{}
	switch err := c.Store.Get(ctx, store.EtcdClusterKey, ec); {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("reading the EtcdCluster: %w", err)
	case ec.Metadata.Declared != nil:
		out = append(out, ec)
	}
	pools, _, err := store.List[api.MachinePool](ctx, c.Store, store.PoolsDir)
	if err != nil {
		return nil, fmt.Errorf("reading machine pools: %w", err)
	}
	for _, p := range pools {
		if p.Metadata.Declared != nil {
			out = append(out, p)
		}
	}
	kcs, _, err := store.List[api.KubernetesCluster](ctx, c.Store, store.ClustersDir)
	if err != nil {
		return nil, fmt.Errorf("reading KubernetesClusters: %w", err)
	}
	for _, kc := range kcs {
		if kc.Metadata.Declared != nil {
			out = append(out, kc)
		}
	}
	return out, nil
}

// Drift names the fields whose running spec differs from the flake's
// (as the record keeps it), as JSON paths; nil when none or when the
// record does not declare the object.
func Drift(record *api.FlakeObjects, kind, name string, running any) ([]string, error) {
	if record == nil {
		return nil, nil
	}
	for _, o := range record.Status.Objects {
		if o.Kind != kind || o.Name != name {
			continue
		}
		var want, have any
		if err := json.Unmarshal(o.Spec, &want); err != nil {
			return nil, err
		}
		b, err := json.Marshal(running)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &have); err != nil {
			return nil, err
		}
		var out []string
		diff("spec", want, have, &out)
		return out, nil
	}
	return nil, nil
}

// diff appends the paths under path where want and have differ, with
// both values.
func diff(path string, want, have any, out *[]string) {
	wm, wok := want.(map[string]any)
	hm, hok := have.(map[string]any)
	if wok && hok {
		keys := map[string]bool{}
		for k := range wm {
			keys[k] = true
		}
		for k := range hm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			diff(path+"."+k, wm[k], hm[k], out)
		}
		return
	}
	if specsEqual(want, have) {
		return
	}
	w, _ := json.Marshal(want)
	h, _ := json.Marshal(have)
	*out = append(*out, fmt.Sprintf("%s: flake %s, running %s", path, w, h))
}

// ApplyFile reads the manifest at file and applies it as host
// (ApplyFlake): what nico-agent apply-objects does on a control-plane
// host.
func (c *Cluster) ApplyFile(ctx context.Context, file, host string) (FlakeResult, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return FlakeResult{}, &InvalidError{fmt.Errorf("reading the flake's objects: %w", err)}
	}
	docs, err := Split(file, raw)
	if err != nil {
		return FlakeResult{}, err
	}
	if err := Decode(docs, nil); err != nil {
		return FlakeResult{}, err
	}
	return c.ApplyFlake(ctx, docs, host)
}
