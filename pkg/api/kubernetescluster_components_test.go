package api

import (
	"encoding/json"
	"maps"
	"testing"
)

func TestKubernetesClusterComponentsValidate(t *testing.T) {
	cases := []struct {
		name   string
		change func(*KubernetesCluster)
		want   []string // nil: valid
	}{
		{"every field", func(c *KubernetesCluster) {
			c.Spec.ControlPlane.Components.APIServer = ComponentSpec{Version: "1.37.1", ExtraArgs: map[string]string{"audit-log-maxage": "7", "v": "2"},
				Resources: ComponentResources{CPU: "1500m", Memory: "2Gi"}}
			c.Spec.ControlPlane.Components.Scheduler = ComponentSpec{Provider: ComponentExternal,
				External: &ExternalComponent{URL: "https://10.0.0.5:10259/healthz", CAFile: "/etc/sched/ca.crt"}}
			c.Spec.DataPlane.Kubelet = ComponentSpec{Version: "1.34.0", Resources: ComponentResources{CPU: "0.5", Memory: "512M"}}
		}, nil},
		{"owned apiServer flag", func(c *KubernetesCluster) {
			c.Spec.ControlPlane.Components.APIServer.ExtraArgs = map[string]string{"etcd-servers": "https://x:2379"}
		}, []string{`spec.controlPlane.components.apiServer.extraArgs[etcd-servers]: "etcd-servers"`, "--etcd-servers of kube-apiserver is set by nico", "spec.etcd"}},
		{"owned client CA", func(c *KubernetesCluster) {
			c.Spec.ControlPlane.Components.APIServer.ExtraArgs = map[string]string{"client-ca-file": "/x"}
		}, []string{"extraArgs[client-ca-file]", "certificates and keys it delivers"}},
		{"owned bootstrap auth", func(c *KubernetesCluster) {
			c.Spec.ControlPlane.Components.APIServer.ExtraArgs = map[string]string{"enable-bootstrap-token-auth": "false"}
		}, []string{"extraArgs[enable-bootstrap-token-auth]", "bootstrap token"}},
		{"owned controllers", func(c *KubernetesCluster) {
			c.Spec.ControlPlane.Components.ControllerManager.ExtraArgs = map[string]string{"controllers": "*"}
		}, []string{"spec.controlPlane.components.controllerManager.extraArgs[controllers]", "kube-controller-manager", "bootstrapsigner"}},
		{"owned kubelet flag", func(c *KubernetesCluster) {
			c.Spec.DataPlane.Kubelet.ExtraArgs = map[string]string{"hostname-override": "x"}
		}, []string{"spec.dataPlane.kubelet.extraArgs[hostname-override]", "--hostname-override of kubelet", "names each Node after its machine"}},
		{"same flag elsewhere not owned", func(c *KubernetesCluster) {
			c.Spec.DataPlane.Kubelet.ExtraArgs = map[string]string{"etcd-servers": "x"}
		}, nil},
		{"flag with dashes", func(c *KubernetesCluster) {
			c.Spec.ControlPlane.Components.Scheduler.ExtraArgs = map[string]string{"--v": "2"}
		}, []string{`spec.controlPlane.components.scheduler.extraArgs[--v]: "--v"`, "without the leading --"}},
		{"value with newline", func(c *KubernetesCluster) {
			c.Spec.ControlPlane.Components.Scheduler.ExtraArgs = map[string]string{"v": "2\n--x"}
		}, []string{"extraArgs[v]", "a newline"}},
		{"bad provider", func(c *KubernetesCluster) { c.Spec.ControlPlane.Components.APIServer.Provider = "systemd" },
			[]string{`spec.controlPlane.components.apiServer.provider: "systemd"`, "native", "external"}},
		{"external without url", func(c *KubernetesCluster) { c.Spec.DataPlane.Kubelet.Provider = ComponentExternal },
			[]string{"spec.dataPlane.kubelet.external", "provider external needs it"}},
		{"external with native", func(c *KubernetesCluster) {
			c.Spec.ControlPlane.Components.APIServer.External = &ExternalComponent{URL: "https://a:6443/readyz"}
		}, []string{"spec.controlPlane.components.apiServer.external", "given with provider native"}},
		{"external bad url and CA", func(c *KubernetesCluster) {
			c.Spec.ControlPlane.Components.APIServer = ComponentSpec{Provider: ComponentExternal, External: &ExternalComponent{URL: "10.0.0.5:6443", CAFile: "ca.crt"}}
		}, []string{`apiServer.external.url: "10.0.0.5:6443"`, `apiServer.external.caFile: "ca.crt"`}},
		{"bad version", func(c *KubernetesCluster) { c.Spec.ControlPlane.Components.Scheduler.Version = "1.37" },
			[]string{`spec.controlPlane.components.scheduler.version: "1.37"`, "MAJOR.MINOR.PATCH"}},
		{"version outside table", func(c *KubernetesCluster) { c.Spec.DataPlane.Kubelet.Version = "1.20.0" },
			[]string{`spec.dataPlane.kubelet.version: "1.20.0"`, "not in nico's version table"}},
		{"scheduler newer than API server", func(c *KubernetesCluster) {
			c.Spec.Version = "1.36.3"
			c.Spec.ControlPlane.Components.Scheduler.Version = "1.37.0"
		}, []string{`spec.controlPlane.components.scheduler.version: "1.37.0"`, "newer than the API server's 1.36.3", "skew"}},
		{"controller-manager two minors behind", func(c *KubernetesCluster) {
			c.Spec.ControlPlane.Components.ControllerManager.Version = "1.35.0"
		}, []string{"controllerManager.version", "2 minors behind the API server's 1.37.2", "at most 1 minor"}},
		{"kubelet four minors behind", func(c *KubernetesCluster) { c.Spec.DataPlane.Kubelet.Version = "1.33.0" },
			[]string{"spec.dataPlane.kubelet.version", "4 minors behind", "at most 3"}},
		{"API server ahead of the cluster's others", func(c *KubernetesCluster) {
			c.Spec.Version = "1.36.0"
			c.Spec.ControlPlane.Components.APIServer.Version = "1.37.0"
		}, nil},
		{"bad cpu", func(c *KubernetesCluster) { c.Spec.ControlPlane.Components.APIServer.Resources.CPU = "-1" },
			[]string{`apiServer.resources.cpu: "-1"`, "500m"}},
		{"zero cpu", func(c *KubernetesCluster) { c.Spec.ControlPlane.Components.APIServer.Resources.CPU = "0m" },
			[]string{`apiServer.resources.cpu: "0m"`}},
		{"bad memory", func(c *KubernetesCluster) { c.Spec.DataPlane.Kubelet.Resources.Memory = "1.5Gi" },
			[]string{`spec.dataPlane.kubelet.resources.memory: "1.5Gi"`, "512Mi"}},
		{"tiny memory", func(c *KubernetesCluster) { c.Spec.DataPlane.Kubelet.Resources.Memory = "1000k" },
			[]string{"kubelet.resources.memory", "less than 1Mi"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validCluster()
			tc.change(c)
			checkRefusal(t, c.Validate(), tc.want)
		})
	}
}

func TestComponentDefaults(t *testing.T) {
	var s KubernetesClusterSpec
	s.Version = "1.37.2"
	s.DataPlane.Kubelet.Version = "1.36.1"
	for _, tc := range []struct {
		part          Part
		version       string
		provider      ComponentProvider
		field, binary string
	}{
		{PartAPIServer, "1.37.2", ComponentNative, "spec.controlPlane.components.apiServer", "kube-apiserver"},
		{PartScheduler, "1.37.2", ComponentNative, "spec.controlPlane.components.scheduler", "kube-scheduler"},
		{PartKubelet, "1.36.1", ComponentNative, "spec.dataPlane.kubelet", "kubelet"},
	} {
		c := s.Component(tc.part)
		if got := c.VersionOr(s.Version); got != tc.version {
			t.Errorf("%s version %q, want %q", tc.part, got, tc.version)
		}
		if c.ProviderOrDefault() != tc.provider || tc.part.Field() != tc.field || tc.part.Binary() != tc.binary {
			t.Errorf("%s: provider %q field %q binary %q", tc.part, c.ProviderOrDefault(), tc.part.Field(), tc.part.Binary())
		}
	}
}

func TestSystemdLimits(t *testing.T) {
	for _, tc := range []struct {
		r    ComponentResources
		want map[string]string
	}{
		{ComponentResources{}, map[string]string{}},
		{ComponentResources{CPU: "500m"}, map[string]string{"CPUQuota": "50%"}},
		{ComponentResources{CPU: "2", Memory: "512Mi"}, map[string]string{"CPUQuota": "200%", "MemoryMax": "536870912"}},
		{ComponentResources{CPU: "0.25", Memory: "2G"}, map[string]string{"CPUQuota": "25%", "MemoryMax": "2000000000"}},
		{ComponentResources{CPU: "1m", Memory: "1048576"}, map[string]string{"CPUQuota": "0.1%", "MemoryMax": "1048576"}},
	} {
		if got := tc.r.SystemdLimits(); !maps.Equal(got, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.r, got, tc.want)
		}
	}
}

// TestComponentsJSON: the planes keep their machine-set fields inline
// beside components and kubelet.
func TestComponentsJSON(t *testing.T) {
	in := `{"apiVersion":"nico.homystack.io/v1alpha1","kind":"KubernetesCluster","metadata":{"name":"c"},"spec":{
		"controlPlane":{"machines":["cp-1"],"components":{"apiServer":{"extraArgs":{"v":"2"},"resources":{"memory":"1Gi"}}}},
		"dataPlane":{"machines":["w-1"],"kubelet":{"version":"1.37.0"}},"version":"1.37.2"}}`
	c, err := DecodeKubernetesCluster([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if c.Spec.ControlPlane.Machines[0] != "cp-1" || c.Spec.ControlPlane.Components.APIServer.ExtraArgs["v"] != "2" ||
		c.Spec.ControlPlane.Components.APIServer.Resources.Memory != "1Gi" || c.Spec.DataPlane.Kubelet.Version != "1.37.0" || c.Spec.DataPlane.Machines[0] != "w-1" {
		t.Fatalf("decoded %+v", c.Spec)
	}
	out, err := json.Marshal(c.Spec.DataPlane)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"machines":["w-1"],"kubelet":{"version":"1.37.0"}}` {
		t.Errorf("dataPlane marshals as %s", out)
	}
	if _, err := DecodeKubernetesCluster([]byte(`{"apiVersion":"nico.homystack.io/v1alpha1","kind":"KubernetesCluster","metadata":{"name":"c"},"spec":{"controlPlane":{"machines":["a"],"components":{"etcd":{}}}}}`)); err == nil {
		t.Error("an unknown component was accepted")
	}
}

// TestEffectiveProbes: an external control-plane component is probed at
// its external URL (and CA), keeping its lease; native ones keep
// spec.probes.
func TestEffectiveProbes(t *testing.T) {
	var s KubernetesClusterSpec
	s.Probes.Scheduler = &ComponentProbe{Disabled: true, LeaderLease: "kube-system/sched"}
	s.ControlPlane.Components.Scheduler = ComponentSpec{Provider: ComponentExternal, External: &ExternalComponent{URL: "https://10.0.0.7:10259/healthz", CAFile: "/etc/ext/ca.crt"}}
	s.ControlPlane.Components.APIServer = ComponentSpec{Provider: ComponentExternal, External: &ExternalComponent{URL: "https://lb.example:6443/readyz"}}
	p := s.EffectiveProbes().WithDefaults()
	if got := *p.Scheduler; got != (ComponentProbe{URL: "https://10.0.0.7:10259/healthz", CAFile: "/etc/ext/ca.crt", LeaderLease: "kube-system/sched"}) {
		t.Errorf("scheduler probe %+v", got)
	}
	if got := *p.APIServer; got != (ComponentProbe{URL: "https://lb.example:6443/readyz"}) {
		t.Errorf("apiServer probe %+v", got)
	}
	if *p.ControllerManager != DefaultControllerManagerProbe {
		t.Errorf("native controllerManager probe %+v", *p.ControllerManager)
	}
	if s.Probes.APIServer != nil || !s.Probes.Scheduler.Disabled {
		t.Error("EffectiveProbes changed the spec")
	}
}
