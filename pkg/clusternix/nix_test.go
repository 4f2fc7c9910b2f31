package clusternix_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/clusternix"
)

// schemaFile is the Nix side of the schema, from this package's directory.
var schemaFile = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "nixos-module", "lib", "cluster-schema.nix")
}()

// requireNixInstantiate skips t unless nix-instantiate is on PATH (the
// Debian package nix-bin); with NICO_REQUIRE_NIX=1 (make test) it fails t.
// Evaluation needs no writable store.
func requireNixInstantiate(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("nix-instantiate"); err == nil {
		return
	}
	if os.Getenv("NICO_REQUIRE_NIX") == "1" {
		t.Fatal("nix-instantiate is not on PATH and NICO_REQUIRE_NIX=1 (Debian package nix-bin; .ci/deps.sh installs it)")
	}
	t.Skip("nix-instantiate is not on PATH (Debian package nix-bin; NICO_REQUIRE_NIX=1 fails instead)")
}

// nixEval evaluates expr strictly and returns its JSON, or an error
// holding nix-instantiate's standard error.
func nixEval(t testing.TB, expr string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command("nix-instantiate", "--eval", "--strict", "--json", "--readonly-mode", "-E", expr)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: %s", err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// loadExpr is a Nix expression that loads file through the schema and
// keeps the fields and helpers that are data.
func loadExpr(file string) string {
	return fmt.Sprintf(`let c = (import (/. + %s)).load (/. + %s); in removeAttrs c [ "machine" "isFirstServer" "url" "runs" "componentArgs" "componentLimits" ] // { firstIsFirst = if c.firstServer == null then null else c.isFirstServer c.firstServer; ipv6URL = c.url "fd00::1" 6443; runs = map c.runs [ "apiServer" "controllerManager" "scheduler" "kubelet" ]; apiServerArgs = c.componentArgs "apiServer"; kubeletArgs = c.componentArgs "kubelet"; apiServerLimits = c.componentLimits "apiServer"; }`, clusternix.Quote(schemaFile), clusternix.Quote(file))
}

// loaded is what loadExpr evaluates to.
type loaded struct {
	SchemaVersion        int                 `json:"schemaVersion"`
	Name                 string              `json:"name"`
	Version              string              `json:"version"`
	ControlPlaneEndpoint clusternix.Endpoint `json:"controlPlaneEndpoint"`
	FirstServer          *string             `json:"firstServer"`
	FirstIsFirst         *bool               `json:"firstIsFirst"`
	Etcd                 struct {
		Provider  string   `json:"provider"`
		Endpoints []string `json:"endpoints"`
		Prefix    *string  `json:"prefix"`
		Proxy     *struct {
			Namespace        string              `json:"namespace"`
			Listen           clusternix.Endpoint `json:"listen"`
			ClientCommonName string              `json:"clientCommonName"`
		} `json:"proxy"`
	} `json:"etcd"`
	EtcdProxy *struct {
		URL       string            `json:"url"`
		Args      []string          `json:"args"`
		Datastore map[string]string `json:"datastore"`
	} `json:"etcdProxy"`
	Paths    map[string]string `json:"paths"`
	Machines map[string]struct {
		Role          string   `json:"role"`
		Address       string   `json:"address"`
		Addresses     []string `json:"addresses"`
		IsFirstServer bool     `json:"isFirstServer"`
	} `json:"machines"`
	MachineNames       []string `json:"machineNames"`
	ControlPlaneNames  []string `json:"controlPlaneNames"`
	ServerURL          string   `json:"serverURL"`
	FirstServerMachine *struct {
		Name string `json:"name"`
	} `json:"firstServerMachine"`
	IPv6URL         string            `json:"ipv6URL"`
	EtcdServers     string            `json:"etcdServers"`
	Runs            []bool            `json:"runs"`
	APIServerArgs   []string          `json:"apiServerArgs"`
	KubeletArgs     []string          `json:"kubeletArgs"`
	APIServerLimits map[string]string `json:"apiServerLimits"`
	Components      map[string]struct {
		Version string `json:"version"`
	} `json:"components"`
}

// writeRendered renders c into a temporary cluster.nix.
func writeRendered(t *testing.T, c clusternix.Cluster) (string, []byte) {
	t.Helper()
	out, err := clusternix.Render(c)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "cluster.nix")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return file, out
}

// TestSchemaLoadsRendered evaluates every rendered cluster.nix through
// the Nix-side validation with real nix-instantiate and checks what the
// flakes read: every field, each machine's role and address, the helpers.
func TestSchemaLoadsRendered(t *testing.T) {
	requireNixInstantiate(t)
	for name, mk := range clusters {
		t.Run(name, func(t *testing.T) {
			c := mk()
			file, _ := writeRendered(t, c)
			out, err := nixEval(t, loadExpr(file))
			if err != nil {
				t.Fatal(err)
			}
			var l loaded
			if err := json.Unmarshal(out, &l); err != nil {
				t.Fatal(err)
			}
			if l.SchemaVersion != clusternix.SchemaVersion || l.Name != c.Name || l.Version != strings.TrimPrefix(c.Version, "v") || l.ControlPlaneEndpoint != c.ControlPlaneEndpoint {
				t.Errorf("loaded %+v from %+v", l, c)
			}
			checkComponents(t, c, l)
			if l.Etcd.Provider != string(c.Etcd.Provider) || len(l.Etcd.Endpoints) != len(c.Etcd.Endpoints) || (l.Etcd.Prefix == nil) != (c.Etcd.Prefix == "") {
				t.Errorf("etcd: loaded %+v from %+v", l.Etcd, c.Etcd)
			}
			if (l.FirstServer == nil) != (c.FirstServer == "") || (l.FirstServer != nil && (*l.FirstServer != c.FirstServer || !*l.FirstIsFirst)) {
				t.Errorf("firstServer: loaded %v from %q", l.FirstServer, c.FirstServer)
			}
			for role, nodes := range map[string][]clusternix.Node{"controlPlane": c.Nodes.ControlPlane, "dataPlane": c.Nodes.DataPlane} {
				for _, n := range nodes {
					m, ok := l.Machines[n.Name]
					if !ok || m.Role != role || m.Address != n.Addresses[0] || strings.Join(m.Addresses, ",") != strings.Join(n.Addresses, ",") || m.IsFirstServer != (n.Name == c.FirstServer) {
						t.Errorf("machine %s: loaded %+v (present %v) from %+v, role %s", n.Name, m, ok, n, role)
					}
				}
			}
			if len(l.MachineNames) != len(c.Nodes.ControlPlane)+len(c.Nodes.DataPlane) || len(l.ControlPlaneNames) != len(c.Nodes.ControlPlane) {
				t.Errorf("machineNames %v, controlPlaneNames %v", l.MachineNames, l.ControlPlaneNames)
			}
			want := map[string]string{
				"joinToken": c.Paths.JoinToken, "bootstrapKubeconfig": c.Paths.BootstrapKubeconfig, "bootstrapToken": c.Paths.BootstrapToken, "machineSSHKey": c.Paths.MachineSSHKey, "caCert": c.Paths.CACert, "caKey": c.Paths.CAKey,
				"apiserverCert": c.Paths.APIServerCert, "apiserverKey": c.Paths.APIServerKey,
				"etcdCACert": c.Paths.EtcdCACert, "apiserverEtcdClientCert": c.Paths.APIServerEtcdClientCert,
				"apiserverEtcdClientKey": c.Paths.APIServerEtcdClientKey, "serviceAccountKey": c.Paths.ServiceAccountKey,
				"serviceAccountPub": c.Paths.ServiceAccountPub, "frontProxyCACert": c.Paths.FrontProxyCACert,
				"frontProxyCAKey": c.Paths.FrontProxyCAKey, "kubeconfig": c.Paths.Kubeconfig,
			}
			if fmt.Sprint(l.Paths) != fmt.Sprint(want) {
				t.Errorf("paths: loaded %v, want %v", l.Paths, want)
			}
			host := c.ControlPlaneEndpoint.Host
			if strings.Contains(host, ":") {
				host = "[" + host + "]"
			}
			if l.ServerURL != fmt.Sprintf("https://%s:%d", host, c.ControlPlaneEndpoint.Port) {
				t.Errorf("serverURL %q", l.ServerURL)
			}
			if (l.FirstServerMachine == nil) != (c.FirstServer == "") || (l.FirstServerMachine != nil && l.FirstServerMachine.Name != c.FirstServer) {
				t.Errorf("firstServerMachine %v with firstServer %q", l.FirstServerMachine, c.FirstServer)
			}
			if l.IPv6URL != "https://[fd00::1]:6443" {
				t.Errorf("url \"fd00::1\" 6443 = %q", l.IPv6URL)
			}
			if l.EtcdServers != strings.Join(l.Etcd.Endpoints, ",") {
				t.Errorf("etcdServers %q", l.EtcdServers)
			}
			switch x := c.Etcd.Proxy; {
			case x == nil:
				if l.Etcd.Proxy != nil || l.EtcdProxy != nil {
					t.Errorf("etcd.proxy %+v, etcdProxy %+v with no proxy", l.Etcd.Proxy, l.EtcdProxy)
				}
			case l.Etcd.Proxy == nil || l.EtcdProxy == nil:
				t.Errorf("etcd.proxy %+v, etcdProxy %+v, want %+v", l.Etcd.Proxy, l.EtcdProxy, x)
			default:
				if l.Etcd.Proxy.Namespace != x.Namespace || l.Etcd.Proxy.Listen != x.Listen || l.Etcd.Proxy.ClientCommonName != x.ClientCommonName {
					t.Errorf("etcd.proxy %+v, want %+v", l.Etcd.Proxy, x)
				}
				wantURL := fmt.Sprintf("https://%s:%d", x.Listen.Host, x.Listen.Port)
				ds := map[string]string{"endpoint": wantURL, "cafile": c.Paths.CACert, "certfile": c.Paths.APIServerEtcdClientCert, "keyfile": c.Paths.APIServerEtcdClientKey}
				if l.EtcdProxy.URL != wantURL || fmt.Sprint(l.EtcdProxy.Datastore) != fmt.Sprint(ds) {
					t.Errorf("etcdProxy %+v", l.EtcdProxy)
				}
				wantArgs := []string{"--namespace=" + x.Namespace, "--endpoints=" + l.EtcdServers,
					fmt.Sprintf("--listen=%s:%d", x.Listen.Host, x.Listen.Port), "--client-cn=" + x.ClientCommonName,
					"--etcd-cacert=" + c.Paths.EtcdCACert, "--cert=" + c.Paths.APIServerEtcdClientCert, "--key=" + c.Paths.APIServerEtcdClientKey,
					"--serving-cert=" + c.Paths.APIServerCert, "--serving-key=" + c.Paths.APIServerKey}
				if strings.Join(l.EtcdProxy.Args, " ") != strings.Join(wantArgs, " ") {
					t.Errorf("etcdProxy.args %q, want %q", l.EtcdProxy.Args, wantArgs)
				}
			}
		})
	}
}

// checkComponents: the components' helpers give what the flakes apply:
// which the flake runs, the extra flags and the unit limits.
func checkComponents(t *testing.T, c clusternix.Cluster, l loaded) {
	t.Helper()
	parts := []clusternix.Component{c.Components.APIServer, c.Components.ControllerManager, c.Components.Scheduler, c.Components.Kubelet}
	for i, name := range []string{"apiServer", "controllerManager", "scheduler", "kubelet"} {
		if want := parts[i].Provider != clusternix.External; l.Runs[i] != want {
			t.Errorf("runs %s = %v, want %v", name, l.Runs[i], want)
		}
		want := strings.TrimPrefix(parts[i].Version, "v")
		if want == "" {
			want = strings.TrimPrefix(c.Version, "v")
		}
		if got := l.Components[name].Version; got != want {
			t.Errorf("components.%s.version %q, want %q", name, got, want)
		}
	}
	args := func(m map[string]string) string {
		var names, out []string
		for k := range m {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			out = append(out, "--"+k+"="+m[k])
		}
		return strings.Join(out, " ")
	}
	if strings.Join(l.APIServerArgs, " ") != args(c.Components.APIServer.ExtraArgs) || strings.Join(l.KubeletArgs, " ") != args(c.Components.Kubelet.ExtraArgs) {
		t.Errorf("componentArgs: apiServer %q, kubelet %q from %+v", l.APIServerArgs, l.KubeletArgs, c.Components)
	}
	if fmt.Sprint(l.APIServerLimits) != fmt.Sprint(c.Components.APIServer.Limits) && len(l.APIServerLimits)+len(c.Components.APIServer.Limits) > 0 {
		t.Errorf("componentLimits apiServer %v, want %v", l.APIServerLimits, c.Components.APIServer.Limits)
	}
}
