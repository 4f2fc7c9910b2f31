package clusternix_test

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/clusternix"
)

var update = flag.Bool("update", false, "rewrite testdata/*.cluster.nix from the generator")

// TestRenderGolden compares each cluster's cluster.nix with its golden
// file (go test -run TestRenderGolden -update rewrites them); the example
// flakes' checks (tests/nixos/eval/examples.nix) read these files too.
func TestRenderGolden(t *testing.T) {
	for name, mk := range clusters {
		t.Run(name, func(t *testing.T) {
			got, err := clusternix.Render(mk())
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+".cluster.nix")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestRenderGolden -update)", err)
			}
			paths := strings.Split(strings.SplitN(strings.SplitN(string(got), "paths = {\n", 2)[1], "\n  };", 2)[0], "\n")
			if !slices.IsSorted(paths) || len(paths) != 16 {
				t.Errorf("paths are not the 16 sorted by name:\n%s", strings.Join(paths, "\n"))
			}
			if string(got) != string(want) {
				t.Errorf("cluster.nix differs from %s (go test -run TestRenderGolden -update rewrites it):\n%s", golden, got)
			}
		})
	}
}

// TestRenderDeterministic: the order of nodes and endpoints in the input
// does not change the output.
func TestRenderDeterministic(t *testing.T) {
	c := clusters["nico-ha"]()
	a, err := clusternix.Render(c)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(c.Nodes.ControlPlane)
	slices.Reverse(c.Nodes.DataPlane)
	slices.Reverse(c.Etcd.Endpoints)
	b, err := clusternix.Render(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Errorf("reordered input renders differently:\n%s\n---\n%s", a, b)
	}
	if c := clusters["nico-ha"](); c.Nodes.ControlPlane[0].Name != "cp-3" {
		t.Errorf("Render sorted its input in place")
	}
}

// TestRenderComponentVersion: a component's own version is rendered
// without its "v", the others take the cluster's.
func TestRenderComponentVersion(t *testing.T) {
	c := clusters["nico-ha"]()
	c.Components.Kubelet.Version = "v1.35.1"
	c.Components.ControllerManager.Version = ""
	out, err := clusternix.Render(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"controllerManager = {\n      provider = \"native\";\n      version = \"1.37.2\";", "kubelet = {\n      provider = \"native\";\n      version = \"1.35.1\";"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("cluster.nix lacks %q:\n%s", want, out)
		}
	}
}
