package clusternix_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/clusternix"
)

// TestValidateRefuses: each bad input is refused with an error that wraps
// ErrInvalid and names the field, the value and what is accepted, and
// Render writes nothing.
func TestValidateRefuses(t *testing.T) {
	cases := []struct {
		name   string
		change func(*clusternix.Cluster)
		want   string
	}{
		{"name", func(c *clusternix.Cluster) { c.Name = "Prod_1" }, `name "Prod_1": want a DNS label`},
		{"version", func(c *clusternix.Cluster) { c.Version = "1.37.2-rc.0" }, `version "1.37.2-rc.0": want a Kubernetes version MAJOR.MINOR or MAJOR.MINOR.PATCH`},
		{"endpoint host", func(c *clusternix.Cluster) { c.ControlPlaneEndpoint.Host = "api example" }, `controlPlaneEndpoint.host "api example": want an IP address or a DNS name`},
		{"endpoint port", func(c *clusternix.Cluster) { c.ControlPlaneEndpoint.Port = 0 }, `controlPlaneEndpoint.port 0: want a port from 1 to 65535`},
		{"no control plane", func(c *clusternix.Cluster) { c.Nodes.ControlPlane = nil }, `nodes.controlPlane []: want at least one control-plane node`},
		{"node name", func(c *clusternix.Cluster) { c.Nodes.DataPlane[1].Name = "w 1" }, `nodes.dataPlane[1].name "w 1": want a DNS label`},
		{"duplicate node", func(c *clusternix.Cluster) { c.Nodes.DataPlane[0].Name = "cp-1" }, `nodes.dataPlane[0].name "cp-1": want a name no other node has (also at nodes.controlPlane[1])`},
		{"no address", func(c *clusternix.Cluster) { c.Nodes.ControlPlane[0].Addresses = nil }, `nodes.controlPlane[0].addresses []: want at least one address`},
		{"bad address", func(c *clusternix.Cluster) { c.Nodes.ControlPlane[0].Addresses = []string{"10.0.0.3\n"} }, `nodes.controlPlane[0].addresses[0] "10.0.0.3\n": want an IP address or a DNS name`},
		{"address twice", func(c *clusternix.Cluster) { c.Nodes.ControlPlane[0].Addresses = []string{"a.example", "a.example"} }, `nodes.controlPlane[0].addresses[1] "a.example": want addresses listed once each`},
		{"first server", func(c *clusternix.Cluster) { c.FirstServer = "worker-1" }, `firstServer "worker-1": want the name of a node in nodes.controlPlane, or empty`},
		{"provider", func(c *clusternix.Cluster) { c.Etcd.Provider = "" }, `etcd.provider "": want one of nico, external, distribution`},
		{"nico without endpoints", func(c *clusternix.Cluster) { c.Etcd.Endpoints = nil }, `etcd.endpoints []: want at least one endpoint with etcd.provider nico`},
		{"nico without prefix", func(c *clusternix.Cluster) { c.Etcd.Prefix = "" }, `etcd.prefix "": want a key prefix with etcd.provider nico`},
		{"prefix", func(c *clusternix.Cluster) { c.Etcd.Prefix = "/clusters/prod/" }, `etcd.prefix "/clusters/prod/": want a key prefix such as /clusters/NAME/registry`},
		{"endpoint", func(c *clusternix.Cluster) { c.Etcd.Endpoints[1] = "10.0.0.1:2379" }, `etcd.endpoints[1] "10.0.0.1:2379": want an etcd client URL https://HOST:PORT`},
		{"endpoint's trailing slash", func(c *clusternix.Cluster) { c.Etcd.Endpoints[2] = "https://10.0.0.3:2379/" }, `etcd.endpoints[2] "https://10.0.0.3:2379/": want an etcd client URL`},
		{"endpoint path", func(c *clusternix.Cluster) { c.Etcd.Endpoints[0] = "https://10.0.0.1:2379/v3" }, `etcd.endpoints[0] "https://10.0.0.1:2379/v3": want an etcd client URL`},
		{"distribution with endpoints", func(c *clusternix.Cluster) {
			c.Etcd.Provider = clusternix.EtcdDistribution
			c.Etcd.Prefix = ""
			c.FirstServer = "cp-1"
		},
			`etcd.endpoints "https://10.0.0.2:2379,https://10.0.0.1:2379,https://10.0.0.3:2379": want no endpoints with etcd.provider distribution`},
		{"distribution without first server", func(c *clusternix.Cluster) { *c = clusters["distribution"](); c.FirstServer = "" }, `firstServer "": want the control-plane node that initialises the datastore`},
		{"proxy with a prefix", func(c *clusternix.Cluster) {
			*c = clusters["nico-namespaced"]()
			c.Etcd.Prefix = "/clusters/k3s/registry"
		},
			`etcd.prefix "/clusters/k3s/registry": want no prefix with etcd.proxy`},
		{"proxy off loopback", func(c *clusternix.Cluster) { *c = clusters["nico-namespaced"](); c.Etcd.Proxy.Listen.Host = "10.0.0.1" },
			`etcd.proxy.listen.host "10.0.0.1": want a loopback address`},
		{"proxy namespace", func(c *clusternix.Cluster) {
			*c = clusters["nico-namespaced"]()
			c.Etcd.Proxy.Namespace = "/clusters/k3s"
		},
			`etcd.proxy.namespace "/clusters/k3s": want a key prefix ending in '/'`},
		{"proxy client name", func(c *clusternix.Cluster) { *c = clusters["nico-namespaced"](); c.Etcd.Proxy.ClientCommonName = "" },
			`etcd.proxy.clientCommonName "": want the cluster's etcd user`},
		{"component provider", func(c *clusternix.Cluster) { c.Components.APIServer.Provider = "systemd" }, `components.apiServer.provider "systemd": want one of native, external`},
		{"external component without URL", func(c *clusternix.Cluster) { c.Components.Scheduler.ExternalURL = "" }, `components.scheduler.external.url "": want an http or https URL`},
		{"native component with URL", func(c *clusternix.Cluster) { c.Components.Kubelet.ExternalURL = "https://x:10250/healthz" }, `components.kubelet.external.url "https://x:10250/healthz": want no URL with provider native`},
		{"component version", func(c *clusternix.Cluster) { c.Components.ControllerManager.Version = "latest" }, `components.controllerManager.version "latest": want a Kubernetes version`},
		{"flag name", func(c *clusternix.Cluster) { c.Components.APIServer.ExtraArgs["--v"] = "3" }, `components.apiServer.extraArgs "--v": want a flag name`},
		{"flag value", func(c *clusternix.Cluster) { c.Components.Kubelet.ExtraArgs["max-pods"] = "5\n0" }, `components.kubelet.extraArgs.max-pods "5\n0": want a value on one line`},
		{"limit name", func(c *clusternix.Cluster) { c.Components.APIServer.Limits["MemoryLimit"] = "1" }, `components.apiServer.limits "MemoryLimit": want one of CPUQuota, MemoryMax`},
		{"CPU quota", func(c *clusternix.Cluster) { c.Components.APIServer.Limits["CPUQuota"] = "1.5" }, `components.apiServer.limits.CPUQuota "1.5": want a percentage`},
		{"memory max", func(c *clusternix.Cluster) { c.Components.ControllerManager.Limits["MemoryMax"] = "512M" }, `components.controllerManager.limits.MemoryMax "512M": want a positive number of bytes`},
		{"proxy with external", func(c *clusternix.Cluster) {
			*c = clusters["nico-namespaced"]()
			c.Etcd.Provider = clusternix.EtcdExternal
		},
			`etcd.proxy "/clusters/k3s/": want no proxy with etcd.provider external`},
		{"relative path", func(c *clusternix.Cluster) { c.Paths.CACert = "pki/ca.crt" }, `paths.caCert "pki/ca.crt": want a clean absolute path`},
		{"path with a space", func(c *clusternix.Cluster) { c.Paths.JoinToken = "/var/lib/my token" }, `paths.joinToken "/var/lib/my token": want a clean absolute path`},
		{"unclean path", func(c *clusternix.Cluster) { c.Paths.Kubeconfig = "/etc/../etc/admin.conf" }, `paths.kubeconfig "/etc/../etc/admin.conf": want a clean absolute path`},
		{"two files at one path", func(c *clusternix.Cluster) { c.Paths.CAKey = c.Paths.CACert }, `paths.caKey "/etc/kubernetes/pki/ca.crt": want a path no other file has (also paths.caCert)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := clusters["nico-ha"]()
			tc.change(&c)
			out, err := clusternix.Render(c)
			if err == nil || out != nil {
				t.Fatalf("Render = %q, %v; want an error", out, err)
			}
			if !errors.Is(err, clusternix.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\nwant ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

// TestValidateReportsEveryProblem: one error per bad field, not just the first.
func TestValidateReportsEveryProblem(t *testing.T) {
	c := clusters["nico-ha"]()
	c.Name, c.ControlPlaneEndpoint.Port, c.Paths.ServiceAccountKey = "", 70000, "sa.key"
	err := clusternix.Validate(c)
	for _, want := range []string{`name ""`, "controlPlaneEndpoint.port 70000", `paths.serviceAccountKey "sa.key"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v: want it to name %s", err, want)
		}
	}
	for name, mk := range clusters {
		if err := clusternix.Validate(mk()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
