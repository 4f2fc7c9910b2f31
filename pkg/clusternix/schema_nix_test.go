package clusternix_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSchemaRefusesDrift: a cluster.nix that differs from what the Nix
// side expects (a field missing, unknown, of the wrong type or shape, as a
// generator of another version would write) fails to load with an error
// naming the field.
func TestSchemaRefusesDrift(t *testing.T) {
	requireNixInstantiate(t)
	_, ha := writeRendered(t, clusters["nico-ha"]())
	_, dist := writeRendered(t, clusters["distribution"]())
	_, ns := writeRendered(t, clusters["nico-namespaced"]())
	cases := []struct {
		name      string
		base      []byte
		old, new  string
		wantError string
	}{
		{"schemaVersion missing", ha, "schemaVersion = 3;", "", "cluster.nix: schemaVersion: want the schema version 3: the field is missing"},
		{"schemaVersion 1", ha, "schemaVersion = 3;", "schemaVersion = 1;", "cluster.nix: schemaVersion: want 3, the version this nico lib reads"},
		{"firstServer missing", ha, "firstServer = null;", "", "cluster.nix: firstServer: missing: cluster.nix schema version 3 has"},
		{"unknown top-level field", ha, "name = \"prod\";", "name = \"prod\"; region = \"eu\";", "cluster.nix: region: unknown field"},
		{"port as a string", ha, "port = 6443;", "port = \"6443\";", `cluster.nix: controlPlaneEndpoint.port: want an integer from 1 to 65535, got the string "6443"`},
		{"addresses as a string", ha, `addresses = [ "10.0.0.2" ];`, `addresses = "10.0.0.2";`, `cluster.nix: nodes.controlPlane[1].addresses: want a non-empty list of non-empty strings, got the string "10.0.0.2"`},
		{"empty addresses", ha, `addresses = [ "10.0.1.1" ];`, `addresses = [ ];`, "cluster.nix: nodes.dataPlane[0].addresses: want a non-empty list"},
		{"node field renamed", ha, `{ name = "cp-3";`, `{ hostname = "cp-3";`, "cluster.nix: nodes.controlPlane[2].name: missing"},
		{"node name not a label", ha, `name = "worker-1";`, `name = "Worker_1";`, `cluster.nix: nodes.dataPlane[0].name: want a DNS label`},
		{"duplicate node", ha, `name = "worker-1";`, `name = "cp-1";`, `cluster.nix: nodes: want node names that are unique across both roles ("cp-1" is listed twice)`},
		{"no control plane", dist, "", "", ""}, // replaced below
		{"path missing", ha, `kubeconfig = "/etc/kubernetes/admin.conf";`, "", "cluster.nix: paths.kubeconfig: missing"},
		{"path relative", ha, `caCert = "/etc/kubernetes/pki/ca.crt";`, `caCert = "etc/kubernetes/pki/ca.crt";`, `cluster.nix: paths.caCert: want an absolute path`},
		{"path unknown", ha, `caCert = "/etc/kubernetes/pki/ca.crt";`, `caCert = "/etc/kubernetes/pki/ca.crt"; etcdCert = "/x";`, "cluster.nix: paths.etcdCert: unknown field"},
		{"etcd provider", ha, `provider = "nico";`, `provider = "k3s";`, `cluster.nix: etcd.provider: want one of "nico", "external", "distribution", got the string "k3s"`},
		{"nico without prefix", ha, `prefix = "/clusters/prod/registry";`, `prefix = null;`, `cluster.nix: etcd.prefix: want a key prefix with etcd.provider "nico" (or etcd.proxy), got null`},
		{"proxy with a prefix", ns, `prefix = null;`, `prefix = "/clusters/k3s/registry";`, `cluster.nix: etcd.prefix: want null with etcd.proxy`},
		{"proxy off loopback", ns, `host = "127.0.0.1"; port = 2479;`, `host = "10.0.0.1"; port = 2479;`, `cluster.nix: etcd.proxy.listen.host: want a loopback address such as "127.0.0.1", got the string "10.0.0.1"`},
		{"proxy namespace without its slash", ns, `namespace = "/clusters/k3s/";`, `namespace = "/clusters/k3s";`, `cluster.nix: etcd.proxy.namespace: want a key prefix ending in '/'`},
		{"proxy field unknown", ns, `clientCommonName = "kubernetes:k3s";`, `clientCommonName = "kubernetes:k3s"; user = "root";`, `cluster.nix: etcd.proxy.user: unknown field`},
		{"proxy with external", ns, `provider = "nico";`, `provider = "external";`, `cluster.nix: etcd.proxy: want no proxy with etcd.provider "external"`},
		{"endpoint not a URL", ha, `"https://10.0.0.1:2379"`, `"10.0.0.1:2379"`, `cluster.nix: etcd.endpoints[0]: want an etcd client URL`},
		{"distribution without first server", dist, `firstServer = "s1";`, `firstServer = null;`, `cluster.nix: firstServer: want the initialising control-plane node with etcd.provider "distribution", got null`},
		{"first server not a control-plane node", dist, `firstServer = "s1";`, `firstServer = "a1";`, `cluster.nix: firstServer: want null or one of nodes.controlPlane's names (s1, s2, s3), got the string "a1"`},
		{"distribution with endpoints", dist, `endpoints = [ ];`, `endpoints = [ "https://10.0.0.1:2379" ];`, `cluster.nix: etcd.endpoints: want no endpoints with etcd.provider "distribution"`},
		{"version", ha, `version = "1.37.2";`, `version = "v1.37";`, `cluster.nix: version: want a Kubernetes version such as "1.37.2", got the string "v1.37"`},
		{"components missing", ha, "components = {", "componentz = {", "cluster.nix: components: missing: cluster.nix schema version 3 has"},
		{"component renamed", ha, "    kubelet = {", "    proxy = {", "cluster.nix: components.kubelet: missing"},
		{"component unknown", ha, "components = {", "components = { proxy = { };", "cluster.nix: components.proxy: unknown field"},
		{"component provider", ha, `provider = "native";`, `provider = "systemd";`, `cluster.nix: components.apiServer.provider: want one of "native", "external", got the string "systemd"`},
		{"component version", ha, "controllerManager = {\n      provider = \"native\";\n      version = \"1.37.2\";", "controllerManager = {\n      provider = \"native\";\n      version = \"latest\";", `cluster.nix: components.controllerManager.version: want a Kubernetes version`},
		{"flag name with dashes", ha, `"max-pods" = "50";`, `"--max-pods" = "50";`, `cluster.nix: components.kubelet.extraArgs: want names that are flag names without the leading --`},
		{"flag value not a string", ha, `"max-pods" = "50";`, `"max-pods" = 50;`, `cluster.nix: components.kubelet.extraArgs.max-pods: want a string on one line, got the int 50`},
		{"flag value on two lines", ha, `"v" = "2";`, `"v" = "2\n--x";`, `cluster.nix: components.apiServer.extraArgs.v: want a string on one line`},
		{"limit unknown", ha, `"CPUQuota" = "150%";`, `"CPUWeight" = "150";`, `cluster.nix: components.apiServer.limits: want names that are CPUQuota or MemoryMax`},
		{"limit value", ha, `"CPUQuota" = "150%";`, `"CPUQuota" = "1.5";`, `cluster.nix: components.apiServer.limits.CPUQuota: want a percentage`},
		{"external without URL", ha, `external = { url = "https://10.0.0.50:10259/healthz"; };`, `external = null;`, `cluster.nix: components.scheduler.external: want { url } exactly with provider "external"`},
		{"external URL with native", ha, `provider = "external";`, `provider = "native";`, `cluster.nix: components.scheduler.external: want { url } exactly with provider "external", null with "native"`},
		{"not an attribute set", ha, "", "", ""}, // replaced below
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var text string
			switch tc.name {
			case "no control plane":
				text = cutBetween(string(dist), "controlPlane = [", "\n    ];", "controlPlane = [ ];")
				tc.wantError = "cluster.nix: nodes.controlPlane: want at least one control-plane node, got a list of 0"
			case "not an attribute set":
				text = "[ 1 ]"
				tc.wantError = "cluster.nix: want an attribute set (is this a cluster.nix?), got a list of 1"
			default:
				if !strings.Contains(string(tc.base), tc.old) {
					t.Fatalf("the rendered file has no %q", tc.old)
				}
				text = strings.Replace(string(tc.base), tc.old, tc.new, 1)
			}
			file := filepath.Join(t.TempDir(), "cluster.nix")
			if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := nixEval(t, loadExpr(file))
			if err == nil {
				t.Fatalf("loaded %s\nfrom:\n%s", out, text)
			}
			if !strings.Contains(err.Error(), tc.wantError) {
				t.Errorf("error %v\nwant it to contain %q", err, tc.wantError)
			}
		})
	}
}

// cutBetween replaces the first span of s from start to the end marker
// after it with repl.
func cutBetween(s, start, end, repl string) string {
	i := strings.Index(s, start)
	j := strings.Index(s[i:], end)
	return s[:i] + repl + s[i+j+len(end):]
}
