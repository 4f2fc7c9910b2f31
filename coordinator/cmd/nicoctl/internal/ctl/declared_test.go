package ctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/etcdtest"
)

// TestFlakeObjects: a manifest applied through nicoctl marks its objects
// as the flake's; nicoctl apply, pool scale and delete of one are refused
// (3) unless --force, and describe shows the drift a forced change makes.
func TestFlakeObjects(t *testing.T) {
	c := etcdtest.Start(t, 1)
	st := newStore(t, c)
	registerNode(t, st, "cp-1", c.Members[0])
	eps := c.Endpoints()
	dir := t.TempDir()
	write := func(name string, docs ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	header := "apiVersion: nico.homystack.io/v1\nkind: FlakeObjects\nmetadata: {name: flake}\nspec: {revision: abc123, lastModified: 1700000000}\n"
	manifest := write("manifest.yaml", header, poolDoc, clusterYAML("prod", ""))
	run(t, eps, "apply", "-f", manifest).want(t, ExitOK, []string{"MachinePool web created", "KubernetesCluster prod created", "FlakeObjects recorded: revision abc123"}, nil)
	run(t, eps, "apply", "-f", manifest).want(t, ExitOK, []string{"MachinePool web unchanged", "FlakeObjects unchanged"}, nil)

	scaled := write("scaled.yaml", strings.Replace(poolDoc, "count: 2", "count: 5", 1))
	run(t, eps, "apply", "-f", scaled).want(t, ExitRefused, nil, []string{"MachinePool web is declared in the flake (revision abc123, applied by nicoctl@", "--force"})
	run(t, eps, "pool", "scale", "web", "4").want(t, ExitRefused, nil, []string{"declared in the flake"})
	run(t, eps, "delete", "cluster", "prod").want(t, ExitRefused, nil, []string{"KubernetesCluster prod is declared in the flake"})

	run(t, eps, "pool", "scale", "web", "4", "--force").want(t, ExitOK, nil, nil)
	changed := write("changed.yaml", strings.Replace(clusterYAML("prod", ""), "count: 2", "count: 3", 1))
	run(t, eps, "apply", "-f", changed, "--force").want(t, ExitOK, []string{"KubernetesCluster prod configured"}, nil)
	run(t, eps, "describe", "cluster", "prod").want(t, ExitOK, []string{
		"in the flake, revision abc123", "drift from the flake: 1 fields", "spec.dataPlane.count: flake 2, running 3",
	}, nil)

	// The flake's apply writes its spec back: no drift.
	run(t, eps, "apply", "-f", manifest).want(t, ExitOK, []string{"MachinePool web configured", "KubernetesCluster prod configured"}, nil)
	run(t, eps, "describe", "cluster", "prod").want(t, ExitOK, []string{"drift from the flake: none"}, nil)
}
