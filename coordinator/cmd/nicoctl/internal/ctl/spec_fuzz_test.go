package ctl

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// FuzzReadPool feeds readPool what `nicoctl pool apply -f` reads. A file
// is either refused with an error, or a MachinePool of the right kind and
// version, named by a DNS label, with a count of 0 or more, whose JSON
// encoding reads back to the same pool.
func FuzzReadPool(f *testing.F) {
	f.Add("apiVersion: nico.homystack.io/v1\nkind: MachinePool\nmetadata: {name: web}\nspec:\n  count: 3\n  template: {vcpus: 2, memoryMiB: 2048, diskGiB: 10, baseImage: base.qcow2, network: default, storagePool: default}\n  hostSelector: {rack: a}\n  spread: true\n")
	f.Add(`{"apiVersion":"nico.homystack.io/v1","kind":"MachinePool","metadata":{"name":"db"},"spec":{"count":1}}`)
	f.Add("apiVersion: nico.homystack.io/v1\nkind: MachinePool\nmetadata: {name: x}\nspec: {cont: 3}\n")
	f.Add("apiVersion: nico.homystack.io/v1\nkind: MachinePool\nmetadata: {name: x}\nspec: {count: -3}\n")
	f.Add("apiVersion: nico.homystack.io/v1\nkind: MachinePool\nmetadata: {name: ../Etc}\n")
	f.Add("? [a, b]\n: c\n")
	f.Add("*x")
	f.Fuzz(func(t *testing.T, doc string) {
		p, err := readPool(strings.NewReader(doc))
		if err != nil {
			if p != nil {
				t.Fatalf("error %v with a pool", err)
			}
			return
		}
		if p.Spec.Count < 0 {
			t.Fatalf("accepted count %d", p.Spec.Count)
		}
		if !regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`).MatchString(p.Metadata.Name) {
			t.Fatalf("accepted name %q", p.Metadata.Name)
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("accepted pool does not encode: %v", err)
		}
		again, err := readPool(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("re-encoding %s is refused: %v", b, err)
		}
		if !reflect.DeepEqual(p, again) {
			t.Fatalf("round trip changed the pool:\n%+v\n%+v", p, again)
		}
	})
}

// FuzzReadRolloutSpec feeds readRolloutSpec what `nicoctl rollout start
// -f` reads: refused with an error naming the file, or a spec whose JSON
// encoding reads back to itself and whose batch size is a number or an
// error.
func FuzzReadRolloutSpec(f *testing.F) {
	f.Add("template:\n  gitRepo: https://example.org/fleet.git\n  operation: switch\nnodes: [w1, w2]\nmaxUnavailable: 25%\ncontrolPlaneFirst: true\nstepTimeout: 90s\n")
	f.Add(`{"template":{"gitRepo":"g","operation":"boot"},"paused":true,"undo":true}`)
	f.Add("stepTimeout: forever\n")
	f.Add("maxUnavailable: 150%\n")
	f.Add("template: {gitrepo: x, unknown: 1}\n")
	f.Add("- 1\n- 2\n")
	f.Fuzz(func(t *testing.T, doc string) {
		path := filepath.Join(t.TempDir(), "rollout.yaml")
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		spec, err := readRolloutSpec(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if n, err := spec.BatchSize(7); err == nil && n < 1 {
			t.Fatalf("batch size %d from maxUnavailable %q", n, spec.MaxUnavailable)
		}
		b, err := json.Marshal(spec)
		if err != nil {
			t.Fatalf("accepted spec does not encode: %v", err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		again, err := readRolloutSpec(path)
		if err != nil {
			t.Fatalf("re-encoding %s is refused: %v", b, err)
		}
		if !reflect.DeepEqual(spec, again) {
			t.Fatalf("round trip changed the spec:\n%+v\n%+v", spec, again)
		}
	})
}
