package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"gopkg.in/yaml.v3"
)

// applyCmd is `nicoctl apply -f FILE`: create or update the objects in the
// file, by their kind. If any is refused, none is written.
func (a *app) applyCmd() *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update EtcdCluster, MachinePool and KubernetesCluster objects from a YAML or JSON file (- for stdin)",
		Long: `Create or update the objects of a YAML or JSON file (- for stdin); the file
may hold several YAML documents, separated by ---. Each document's kind picks
what it is: EtcdCluster (the fleet's one etcd cluster, name etcd), MachinePool
or KubernetesCluster (apiVersion nico.homystack.io/v1alpha1; the others
nico.homystack.io/v1). The deprecated group nico.homystack.com is accepted
with a warning on stderr.

Every document is checked before anything is written, and all are written in
one etcd transaction: if one is refused, none is written. A bad field (an
unknown field, a wrong apiVersion or kind, both machines and a selector, a
negative count, a bad label selector, a version outside the table) ends
nicoctl with 2; a change refused against what is stored or running (an etcd
version path etcd does not support, an external member etcd already has, an
etcd provider change on a live cluster, a Kubernetes version change that is
not one step, a Kubernetes version that does not support the fleet's etcd)
with 3. Each refusal names the field's path, the value and what is accepted.

A KubernetesCluster's metadata.generation counts its spec's changes; its
status is the controller's and is kept.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return a.apply(cmd.Context(), cmd.InOrStdin(), file)
		}),
	}
	c.Flags().StringVarP(&file, "file", "f", "", "the objects (apiVersion, kind, metadata.name, spec), one per YAML document")
	return c
}

// readFile reads -f FILE, or stdin for "-".
func readFile(stdin io.Reader, file string) ([]byte, error) {
	switch file {
	case "":
		return nil, withCode(ExitUsage, errors.New("apply needs -f FILE (or -f - for stdin)"))
	case "-":
		b, err := io.ReadAll(stdin)
		return b, withCode(ExitUsage, err)
	default:
		b, err := os.ReadFile(file)
		return b, withCode(ExitUsage, err)
	}
}

// decodeStrict decodes a YAML or JSON document into v through its JSON
// form (the objects' field names), refusing unknown fields.
func decodeStrict(raw []byte, v any) error {
	b, err := yamlToJSON(raw)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// yamlToJSON is one YAML (or JSON) document's JSON form.
func yamlToJSON(raw []byte) ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", err)
	}
	return json.Marshal(doc)
}

// document is one object of an applied file.
type document struct {
	// at names it in messages: the file, and its place when the file
	// holds several.
	at   string
	kind string
	raw  []byte // the document's YAML
	ec   *api.EtcdCluster
	pool *api.MachinePool
	kc   *api.KubernetesCluster
}

// name is the object's name once decoded.
func (d *document) name() string {
	switch {
	case d.ec != nil:
		return d.ec.Metadata.Name
	case d.pool != nil:
		return d.pool.Metadata.Name
	case d.kc != nil:
		return d.kc.Metadata.Name
	}
	return ""
}

// object is the decoded object.
func (d *document) object() api.Object {
	switch {
	case d.ec != nil:
		return d.ec
	case d.pool != nil:
		return d.pool
	}
	return d.kc
}

// apiVersionErr refuses obj's apiVersion unless it is its kind's current
// one or that one's deprecated spelling (api.CheckAPIVersion).
func apiVersionErr(obj api.Object) error {
	_, err := api.CheckAPIVersion(api.APIVersionFor(obj), obj.GetTypeMeta().APIVersion)
	return err
}

// upgradeAPIVersion replaces a deprecated apiVersion in obj, read from
// at, with the current one and warns on stderr: the field, the value and
// what to write instead.
func (a *app) upgradeAPIVersion(at string, obj api.Object) {
	if old, _ := api.UpgradeAPIVersions(obj); old != "" {
		fmt.Fprintf(a.stderr, "nicoctl: warning: %s: %s\n", at, api.DeprecationWarning(api.APIVersionFor(obj), old))
	}
}

// splitDocuments splits a file into its non-empty YAML documents.
func splitDocuments(file string, raw []byte) ([]*document, error) {
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var docs []*document
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: not YAML or JSON: %w", file, len(docs)+1, err)
		}
		if len(n.Content) == 0 || (n.Content[0].Kind == yaml.ScalarNode && n.Content[0].Tag == "!!null") {
			continue // an empty document (a leading or trailing ---)
		}
		b, err := yaml.Marshal(&n)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, len(docs)+1, err)
		}
		var tm struct {
			Kind string `yaml:"kind"`
		}
		_ = n.Decode(&tm)
		docs = append(docs, &document{kind: tm.Kind, raw: b})
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no object in the file", file)
	}
	for i, d := range docs {
		d.at = file
		if len(docs) > 1 {
			d.at = fmt.Sprintf("%s: document %d (%s)", file, i+1, d.kind)
		}
	}
	return docs, nil
}

// decode checks the document on its own, by its kind.
func (d *document) decode() error {
	var err error
	switch d.kind {
	case api.KindEtcdCluster:
		if d.ec, err = readEtcdCluster(d.raw); err != nil {
			return fmt.Errorf("%s: EtcdCluster refused, nothing written:\n%w", d.at, err)
		}
	case api.KindMachinePool:
		if d.pool, err = readPool(bytes.NewReader(d.raw)); err != nil {
			return fmt.Errorf("%s: %w", d.at, err)
		}
	case api.KindKubernetesCluster:
		if d.kc, err = readKubernetesCluster(d.raw); err != nil {
			return fmt.Errorf("%s: KubernetesCluster refused, nothing written:\n%w", d.at, err)
		}
	default:
		return fmt.Errorf("%s: kind %q is not accepted; want %s, %s or %s", d.at, d.kind, api.KindEtcdCluster, api.KindMachinePool, api.KindKubernetesCluster)
	}
	return nil
}

// write is one object to write in the apply's transaction.
type write struct {
	key string
	// rev is the revision the stored object was read at (0: absent): the
	// transaction holds only while every key is still there.
	rev int64
	// obj is what to write (nil: unchanged, only guarded).
	obj api.Object
	msg string
}

func (a *app) apply(ctx context.Context, stdin io.Reader, file string) error {
	raw, err := readFile(stdin, file)
	if err != nil {
		return err
	}
	docs, err := splitDocuments(file, raw)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	var errs []error
	seen := map[string]string{}
	for _, d := range docs {
		if err := d.decode(); err != nil {
			errs = append(errs, err)
			continue
		}
		a.upgradeAPIVersion(d.at, d.object())
		id := d.kind + "/" + d.name()
		if prev, dup := seen[id]; dup {
			errs = append(errs, fmt.Errorf("%s: %s is also %s; give each object once", d.at, id, prev))
		}
		seen[id] = d.at
	}
	if len(errs) > 0 {
		return withCode(ExitUsage, nothingWritten(len(docs), errs))
	}
	return a.withCluster(ctx, func(ctx context.Context, c *cluster) error {
		for {
			writes, err := a.planApply(ctx, c, docs)
			if err != nil {
				return err
			}
			if err := commitWrites(ctx, c.st, writes); errors.Is(err, store.ErrConflict) {
				continue // something changed meanwhile: read and check again
			} else if err != nil {
				return err
			}
			for _, w := range writes {
				fmt.Fprintln(a.stdout, w.msg)
			}
			return nil
		}
	})
}

// nothingWritten joins the refusals of a file, saying that none of its
// objects was written.
func nothingWritten(n int, errs []error) error {
	if n > 1 {
		errs = append(errs, fmt.Errorf("nothing written: none of the file's %d objects", n))
	}
	return errors.Join(errs...)
}

// planApply checks every document against what is stored and running and
// returns the writes; a refusal ends nicoctl with ExitRefused, nothing
// written.
func (a *app) planApply(ctx context.Context, c *cluster, docs []*document) ([]write, error) {
	var writes []write
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
	for _, d := range docs {
		var w write
		var err error
		switch {
		case d.ec != nil:
			w, err = a.planEtcdCluster(ctx, c, d.ec)
			if err == nil {
				err = checkClustersSupport(ctx, c.st, d.ec.Spec.Version, docs)
			}
		case d.pool != nil:
			w, err = planPool(ctx, c.st, d.pool)
		case d.kc != nil:
			w, err = a.planKubernetesCluster(ctx, c, d.kc, running)
		}
		var refused *refusal
		switch {
		case errors.As(err, &refused):
			errs = append(errs, fmt.Errorf("%s: %s refused, nothing written:\n%w", d.at, d.kind, refused.err))
		case err != nil:
			return nil, err
		default:
			writes = append(writes, w)
		}
	}
	if len(errs) > 0 {
		return nil, withCode(ExitRefused, nothingWritten(len(docs), errs))
	}
	return writes, nil
}

// refusal is a document refused against the stored state.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }

// commitWrites writes every changed object in one transaction guarded by
// the revision each was read at; store.ErrConflict when one changed.
func commitWrites(ctx context.Context, st *store.Store, writes []write) error {
	var cmps []clientv3.Cmp
	var ops []clientv3.Op
	for _, w := range writes {
		cmps = append(cmps, store.Unchanged(w.key, w.rev))
		if w.obj == nil {
			continue
		}
		op, err := store.PutObjectOp(w.obj)
		if err != nil {
			return err
		}
		ops = append(ops, op)
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

func writtenKeys(writes []write) []string {
	var out []string
	for _, w := range writes {
		if w.obj != nil {
			out = append(out, w.key)
		}
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
