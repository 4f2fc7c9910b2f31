package clusternix_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/homystack/nico/pkg/clusternix"
)

// FuzzRenderLoads: whatever the generator accepts, the Nix side accepts
// too (the output parses and loads through cluster-schema.nix), with the
// fuzzed strings in the name, an address, the endpoint, the etcd prefix
// and endpoint, and a path.
func FuzzRenderLoads(f *testing.F) {
	f.Add("prod", "10.0.0.1", "api.example", "/clusters/prod/registry", "https://10.0.0.1:2379", "/etc/kubernetes/pki/ca.crt", 6443)
	f.Add("a", "fd00::1", "fd00::10", "/x", "http://[fd00::2]:1", "/a+b@c", 1)
	f.Add(`"${x}"`, "a\nb", `\`, "/a/", "https://h:2379/", "/a b", 0)
	f.Add("b", "h.example", "h.example", "/p", "https://h:2379/", "/c", 2379)
	f.Fuzz(func(t *testing.T, name, addr, host, prefix, endpoint, caPath string, port int) {
		c := clusters["nico-ha"]()
		c.Name, c.ControlPlaneEndpoint = name, clusternix.Endpoint{Host: host, Port: port}
		c.Nodes.DataPlane[0].Addresses = []string{addr}
		c.Etcd.Prefix, c.Etcd.Endpoints = prefix, []string{endpoint}
		c.Paths.CACert = caPath
		out, err := clusternix.Render(c)
		if err != nil {
			return // refused, naming the field (TestValidateRefuses)
		}
		requireNixInstantiate(t)
		file := filepath.Join(t.TempDir(), "cluster.nix")
		if err := os.WriteFile(file, out, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := nixEval(t, loadExpr(file)); err != nil {
			t.Fatalf("the generator accepted, the schema refused:\n%s\n%v", out, err)
		}
	})
}
