package objectapply

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"

	"github.com/homystack/nico/pkg/api"
	"gopkg.in/yaml.v3"
)

// Document is one object of an applied file.
type Document struct {
	// At names it in messages: the file, and its place when the file
	// holds several.
	At   string
	Kind string
	raw  []byte // the document's YAML
	ec   *api.EtcdCluster
	pool *api.MachinePool
	kc   *api.KubernetesCluster
	// flake is the manifest's header document (kind FlakeObjects).
	flake *api.FlakeObjects
}

// Name is the object's name once decoded.
func (d *Document) Name() string {
	if o := d.Object(); o != nil {
		return o.GetMetadata().Name
	}
	return ""
}

// Object is the decoded object (nil before Decode).
func (d *Document) Object() api.Object {
	switch {
	case d.ec != nil:
		return d.ec
	case d.pool != nil:
		return d.pool
	case d.kc != nil:
		return d.kc
	case d.flake != nil:
		return d.flake
	}
	return nil
}

// spec is the decoded object's spec.
func (d *Document) spec() any {
	switch {
	case d.ec != nil:
		return d.ec.Spec
	case d.pool != nil:
		return d.pool.Spec
	case d.kc != nil:
		return d.kc.Spec
	}
	return nil
}

// Split splits a file into its non-empty YAML documents.
func Split(file string, raw []byte) ([]*Document, error) {
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var docs []*Document
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &InvalidError{fmt.Errorf("%s: document %d: not YAML or JSON: %w", file, len(docs)+1, err)}
		}
		if len(n.Content) == 0 || (n.Content[0].Kind == yaml.ScalarNode && n.Content[0].Tag == "!!null") {
			continue // an empty document (a leading or trailing ---)
		}
		b, err := yaml.Marshal(&n)
		if err != nil {
			return nil, &InvalidError{fmt.Errorf("%s: document %d: %w", file, len(docs)+1, err)}
		}
		var tm struct {
			Kind string `yaml:"kind"`
		}
		_ = n.Decode(&tm)
		docs = append(docs, &Document{Kind: tm.Kind, raw: b})
	}
	if len(docs) == 0 {
		return nil, &InvalidError{fmt.Errorf("%s: no object in the file", file)}
	}
	for i, d := range docs {
		d.At = file
		if len(docs) > 1 {
			d.At = fmt.Sprintf("%s: document %d (%s)", file, i+1, d.Kind)
		}
	}
	return docs, nil
}

// Decode checks every document on its own, by its kind, and that no
// object is given twice; warn is told of each deprecated apiVersion,
// which is replaced by the current one. An *InvalidError names every
// problem at once.
func Decode(docs []*Document, warn func(string)) error {
	var errs []error
	seen := map[string]string{}
	for _, d := range docs {
		if err := d.decode(); err != nil {
			errs = append(errs, err)
			continue
		}
		if old, _ := api.UpgradeAPIVersions(d.Object()); old != "" && warn != nil {
			warn(fmt.Sprintf("%s: %s", d.At, api.DeprecationWarning(api.APIVersionFor(d.Object()), old)))
		}
		id := d.Kind + "/" + d.Name()
		if prev, dup := seen[id]; dup {
			errs = append(errs, fmt.Errorf("%s: %s is also %s; give each object once", d.At, id, prev))
		}
		seen[id] = d.At
	}
	if len(errs) > 0 {
		n := 0
		for _, d := range docs {
			if d.Kind != api.KindFlakeObjects {
				n++
			}
		}
		return &InvalidError{nothingWritten(n, errs)}
	}
	return nil
}

// decode checks the document on its own, by its kind.
func (d *Document) decode() error {
	var err error
	switch d.Kind {
	case api.KindEtcdCluster:
		if d.ec, err = readEtcdCluster(d.raw); err != nil {
			return fmt.Errorf("%s: EtcdCluster refused, nothing written:\n%w", d.At, err)
		}
	case api.KindMachinePool:
		if d.pool, err = ReadPool(d.raw); err != nil {
			return fmt.Errorf("%s: %w", d.At, err)
		}
	case api.KindKubernetesCluster:
		if d.kc, err = readKubernetesCluster(d.raw); err != nil {
			return fmt.Errorf("%s: KubernetesCluster refused, nothing written:\n%w", d.At, err)
		}
	case api.KindFlakeObjects:
		if d.flake, err = readFlakeObjects(d.raw); err != nil {
			return fmt.Errorf("%s: FlakeObjects refused, nothing written:\n%w", d.At, err)
		}
	default:
		return fmt.Errorf("%s: kind %q is not accepted; want %s, %s or %s", d.At, d.Kind, api.KindEtcdCluster, api.KindMachinePool, api.KindKubernetesCluster)
	}
	// The flake's mark is the agent's to write, as status is the
	// controller's: a document that carries it (the output of nicoctl get)
	// is read without it.
	d.Object().GetMetadata().Declared = nil
	return nil
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

// apiVersionErr refuses obj's apiVersion unless it is its kind's current
// one or that one's deprecated spelling (api.CheckAPIVersion).
func apiVersionErr(obj api.Object) error {
	_, err := api.CheckAPIVersion(api.APIVersionFor(obj), obj.GetTypeMeta().APIVersion)
	return err
}

// readEtcdCluster decodes an EtcdCluster and checks it on its own: kind,
// apiVersion, name and every spec field (api.EtcdClusterSpec.Validate).
// Its status, if any, is ignored: the leader writes status.
func readEtcdCluster(raw []byte) (*api.EtcdCluster, error) {
	ec := &api.EtcdCluster{}
	if err := decodeStrict(raw, ec); err != nil {
		return nil, fmt.Errorf("EtcdCluster: %w", err)
	}
	switch {
	case apiVersionErr(ec) != nil:
		return nil, apiVersionErr(ec)
	case ec.Metadata.Name == "":
		ec.Metadata.Name = api.EtcdClusterName
	case ec.Metadata.Name != api.EtcdClusterName:
		return nil, fmt.Errorf("metadata.name %q is not accepted; the fleet has one EtcdCluster, named %s", ec.Metadata.Name, api.EtcdClusterName)
	}
	if err := ec.Spec.Validate(); err != nil {
		return nil, err
	}
	return ec, nil
}

// ReadPool decodes a MachinePool, refusing unknown fields.
func ReadPool(raw []byte) (*api.MachinePool, error) {
	p := &api.MachinePool{}
	if err := decodeStrict(raw, p); err != nil {
		return nil, fmt.Errorf("MachinePool: %w", err)
	}
	switch {
	case p.Kind != api.KindMachinePool:
		return nil, fmt.Errorf("kind %q is not accepted; want %s", p.Kind, api.KindMachinePool)
	case apiVersionErr(p) != nil:
		return nil, apiVersionErr(p)
	case p.Metadata.Name == "":
		return nil, errors.New("metadata.name is empty; name the pool")
	case !dnsLabelRE.MatchString(p.Metadata.Name):
		return nil, fmt.Errorf("metadata.name %q is not accepted; use a DNS label: 1 to 63 lowercase letters, digits and '-', starting and ending with a letter or digit", p.Metadata.Name)
	case p.Spec.Count < 0:
		return nil, fmt.Errorf("spec.count %d is not accepted; want 0 or more", p.Spec.Count)
	}
	return p, nil
}

// dnsLabelRE matches an RFC 1123 label: pool names become machine and
// domain names.
var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// readKubernetesCluster decodes a KubernetesCluster strictly and checks it
// on its own (api.DecodeKubernetesCluster): every problem at once, each
// naming its field's path. Its status and metadata other than the name
// are ignored: the controller writes status, nicoctl counts generations.
func readKubernetesCluster(raw []byte) (*api.KubernetesCluster, error) {
	b, err := yamlToJSON(raw)
	if err != nil {
		return nil, err
	}
	return api.DecodeKubernetesCluster(b)
}

// readFlakeObjects decodes a manifest's header.
func readFlakeObjects(raw []byte) (*api.FlakeObjects, error) {
	f := &api.FlakeObjects{}
	if err := decodeStrict(raw, f); err != nil {
		return nil, fmt.Errorf("FlakeObjects: %w", err)
	}
	var errs []error
	if err := apiVersionErr(f); err != nil {
		errs = append(errs, err)
	}
	if f.Metadata.Name == "" {
		f.Metadata.Name = api.FlakeObjectsName
	}
	if f.Metadata.Name != api.FlakeObjectsName {
		errs = append(errs, &api.FieldError{Field: "metadata.name", Value: f.Metadata.Name, Accepted: "name it " + api.FlakeObjectsName + ", or leave it out"})
	}
	if f.Spec.Revision == "" {
		errs = append(errs, &api.FieldError{Field: "spec.revision", Value: "", Reason: "a manifest names the flake revision it was rendered from", Accepted: "self.rev or self.dirtyRev"})
	}
	if f.Spec.LastModified < 0 {
		errs = append(errs, &api.FieldError{Field: "spec.lastModified", Value: f.Spec.LastModified, Accepted: "0 or more: the flake's self.lastModified"})
	}
	switch f.Spec.KubernetesClusterRemoval {
	case "", api.ClusterRemovalOrphan, api.ClusterRemovalDelete:
	default:
		errs = append(errs, &api.FieldError{Field: "spec.kubernetesClusterRemoval", Value: f.Spec.KubernetesClusterRemoval, Accepted: "orphan or delete"})
	}
	return f, errors.Join(errs...)
}
