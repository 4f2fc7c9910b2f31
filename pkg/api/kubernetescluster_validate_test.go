package api

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func validCluster() *KubernetesCluster {
	c := NewKubernetesCluster("prod")
	c.Spec = KubernetesClusterSpec{
		GitRepo: "https://example.org/fleet.git", ConfigurationSubdir: "clusters/prod", CredentialsRef: "git-creds",
		ControlPlane: ControlPlaneSpec{MachineSet: MachineSet{Machines: []string{"cp-1", "cp-2", "cp-3"}}},
		DataPlane: DataPlaneSpec{MachineSet: MachineSet{MachineSelector: &MachineSelector{MatchLabels: map[string]string{
			"node-role.example.org/worker": "true", "zone": "a"}}, Count: 2}},
		Version: "1.37.2", ControlPlaneEndpoint: "k8s.example.org:6443",
		Rollout: ClusterRollout{MaxUnavailable: "25%", StepTimeout: Duration(5 * time.Minute)},
		Probes:  ClusterProbes{Scheduler: &ComponentProbe{URL: "https://127.0.0.1:10259/healthz", LeaderLease: "kube-system/kube-scheduler"}},
		Drain:   &DrainHook{Command: []string{"kubectl", "drain", "--ignore-daemonsets"}},
	}
	return c
}

func TestKubernetesClusterValidate(t *testing.T) {
	cases := []struct {
		name   string
		change func(*KubernetesCluster)
		// want are the pieces the refusal must say; nil: valid.
		want []string
	}{
		{"valid", func(*KubernetesCluster) {}, nil},
		{"minimal", func(c *KubernetesCluster) {
			c.Spec = KubernetesClusterSpec{ControlPlane: ControlPlaneSpec{MachineSet: MachineSet{MachineSelector: &MachineSelector{}, Count: 1}}}
		}, nil},
		{"external etcd", func(c *KubernetesCluster) {
			c.Spec.Etcd = ClusterEtcd{Provider: EtcdProviderExternal, External: &ExternalEtcd{Endpoints: []string{"https://10.0.0.9:2379"}, SecretRef: "ext-etcd"}}
		}, nil},
		{"IPv6 endpoint", func(c *KubernetesCluster) { c.Spec.ControlPlaneEndpoint = "[fd00::1]:6443" }, nil},
		{"v prefix", func(c *KubernetesCluster) { c.Spec.Version = "v1.36.0" }, nil},
		{"wrong apiVersion", func(c *KubernetesCluster) { c.APIVersion = Version },
			[]string{`apiVersion: "nico.homystack.io/v1" is not accepted; use nico.homystack.io/v1alpha1 (nico.homystack.com/v1alpha1 is still read, deprecated)`}},
		{"wrong kind", func(c *KubernetesCluster) { c.Kind = "Cluster" }, []string{`kind: "Cluster" is not accepted; use KubernetesCluster`}},
		{"bad name", func(c *KubernetesCluster) { c.Metadata.Name = "Prod_1" }, []string{`metadata.name: "Prod_1"`, "lower-case"}},
		{"long name", func(c *KubernetesCluster) { c.Metadata.Name = strings.Repeat("a", 41) }, []string{"metadata.name", "1 to 40"}},
		{"planes from a machine pool", func(c *KubernetesCluster) {
			c.Spec.ControlPlane.MachineSet = MachineSet{MachinePool: "cp-vms", Count: 3}
			c.Spec.DataPlane.MachinePool = "workers"
		}, nil},
		{"machine pool without count", func(c *KubernetesCluster) { c.Spec.ControlPlane.MachineSet = MachineSet{MachinePool: "cp-vms"} },
			[]string{"spec.controlPlane.count: 0 is not accepted", "a machine pool with no count asks for no machine", "1 or more"}},
		{"machine pool beside machines", func(c *KubernetesCluster) { c.Spec.ControlPlane.MachinePool = "cp-vms" },
			[]string{`spec.controlPlane.machinePool: "cp-vms" is not accepted`, "given beside machines", "not both"}},
		{"machine pool not a DNS label", func(c *KubernetesCluster) { c.Spec.DataPlane.MachinePool = "Workers!" },
			[]string{`spec.dataPlane.machinePool: "Workers!" is not accepted`, "a DNS label"}},
		{"no control plane", func(c *KubernetesCluster) { c.Spec.ControlPlane.MachineSet = MachineSet{} },
			[]string{"spec.controlPlane", "at least one control-plane machine"}},
		{"machines and selector", func(c *KubernetesCluster) {
			c.Spec.ControlPlane.MachineSelector = &MachineSelector{MatchLabels: map[string]string{"a": "b"}}
		}, []string{"spec.controlPlane.machineSelector: map[a:b] is not accepted", "given beside machines", "not both"}},
		{"machines and count", func(c *KubernetesCluster) { c.Spec.ControlPlane.Count = 3 }, []string{"spec.controlPlane.count: 3", "beside machines"}},
		{"negative count", func(c *KubernetesCluster) { c.Spec.DataPlane.Count = -1 },
			[]string{"spec.dataPlane.count: -1 is not accepted: negative; use a count of 1 or more"}},
		{"selector without count", func(c *KubernetesCluster) { c.Spec.DataPlane.Count = 0 }, []string{"spec.dataPlane.count: 0", "selects no machine"}},
		{"count without selector", func(c *KubernetesCluster) { c.Spec.DataPlane.MachineSelector = nil }, []string{"spec.dataPlane.count: 2", "no machineSelector"}},
		{"duplicate machine", func(c *KubernetesCluster) { c.Spec.ControlPlane.Machines[2] = "cp-1" },
			[]string{`spec.controlPlane.machines[2]: "cp-1"`, "already spec.controlPlane.machines[0]"}},
		{"machine in both planes", func(c *KubernetesCluster) {
			c.Spec.DataPlane.MachineSet = MachineSet{Machines: []string{"w-1", "cp-2"}}
		}, []string{`spec.dataPlane.machines[1]: "cp-2"`, "also in spec.controlPlane.machines"}},
		{"label key with two slashes", func(c *KubernetesCluster) { c.Spec.DataPlane.MachineSelector.MatchLabels["a/b/c"] = "x" },
			[]string{`spec.dataPlane.machineSelector.matchLabels: "a/b/c"`, "key name has a character"}},
		{"label key upper-case prefix", func(c *KubernetesCluster) { c.Spec.DataPlane.MachineSelector.MatchLabels["Example.org/x"] = "y" },
			[]string{`"Example.org/x"`, "prefix is not a lower-case DNS subdomain"}},
		{"label key too long", func(c *KubernetesCluster) {
			c.Spec.DataPlane.MachineSelector.MatchLabels[strings.Repeat("k", 64)] = "y"
		},
			[]string{"longer than 63"}},
		{"label value", func(c *KubernetesCluster) { c.Spec.DataPlane.MachineSelector.MatchLabels["zone"] = "-a" },
			[]string{`spec.dataPlane.machineSelector.matchLabels[zone]: "-a"`, "0 to 63"}},
		{"bad version", func(c *KubernetesCluster) { c.Spec.Version = "1.37" }, []string{`spec.version: "1.37"`, "MAJOR.MINOR.PATCH", "1.31, 1.32"}},
		{"unknown minor", func(c *KubernetesCluster) { c.Spec.Version = "1.29.0" }, []string{`spec.version: "1.29.0"`, "not in nico's version table"}},
		{"endpoint URL", func(c *KubernetesCluster) { c.Spec.ControlPlaneEndpoint = "https://k8s:6443" }, []string{"spec.controlPlaneEndpoint", "a URL"}},
		{"endpoint port", func(c *KubernetesCluster) { c.Spec.ControlPlaneEndpoint = "k8s:0" }, []string{"spec.controlPlaneEndpoint", "port is not 1 to 65535"}},
		{"bad provider", func(c *KubernetesCluster) { c.Spec.Etcd.Provider = "consul" },
			[]string{`spec.etcd.provider: "consul" is not accepted`, "use nico", "external", "distribution"}},
		{"external without endpoints", func(c *KubernetesCluster) { c.Spec.Etcd = ClusterEtcd{Provider: EtcdProviderExternal} },
			[]string{"spec.etcd.external", "provider external needs it"}},
		{"external bad URL and secret", func(c *KubernetesCluster) {
			c.Spec.Etcd = ClusterEtcd{Provider: EtcdProviderExternal, External: &ExternalEtcd{Endpoints: []string{"10.0.0.9:2379"}}}
		}, []string{"spec.etcd.external.endpoints[0]", "spec.etcd.external.secretRef"}},
		{"namespace with distribution", func(c *KubernetesCluster) {
			c.Spec.Etcd = ClusterEtcd{Provider: EtcdProviderDistribution, Namespace: true}
		},
			[]string{"spec.etcd.namespace: true", "given with provider distribution", "spec.etcd.provider: nico"}},
		{"external with nico", func(c *KubernetesCluster) { c.Spec.Etcd.External = &ExternalEtcd{} }, []string{"spec.etcd.external", "given with provider nico"}},
		{"maxUnavailable", func(c *KubernetesCluster) { c.Spec.Rollout.MaxUnavailable = "0" }, []string{`spec.rollout.maxUnavailable: "0"`}},
		{"probe URL and lease", func(c *KubernetesCluster) {
			c.Spec.Probes.Scheduler = &ComponentProbe{URL: "tcp://x", LeaderLease: "kube-scheduler"}
		}, []string{"spec.probes.scheduler.url", "spec.probes.scheduler.leaderLease", "namespace/name"}},
		{"empty drain", func(c *KubernetesCluster) { c.Spec.Drain.Command = nil }, []string{"spec.drain.command", "empty"}},
		{"relative kubeconfig path", func(c *KubernetesCluster) { c.Spec.Kubeconfig.Path = "k3s.yaml" }, []string{"spec.kubeconfig.path"}},
		{"subdir escapes", func(c *KubernetesCluster) { c.Spec.ConfigurationSubdir = "../x" }, []string{"spec.configurationSubdir"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validCluster()
			tc.change(c)
			err := c.Validate()
			checkRefusal(t, err, tc.want)
		})
	}
}

// checkRefusal: err is nil when want is, else an ErrInvalidSpec saying
// every piece of want.
func checkRefusal(t *testing.T, err error, want []string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("accepted; want a refusal saying %q", want)
	}
	if !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("%v is not ErrInvalidSpec", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("refusal lacks %q:\n%v", w, err)
		}
	}
}

// TestValidateReportsAll: several problems come back together.
func TestValidateReportsAll(t *testing.T) {
	c := validCluster()
	c.APIVersion, c.Spec.DataPlane.Count, c.Spec.Etcd.Provider = "v1", -2, "x"
	checkRefusal(t, c.Validate(), []string{"apiVersion", "spec.dataPlane.count: -2", "spec.etcd.provider"})
}

func TestDecodeKubernetesCluster(t *testing.T) {
	good := `{"apiVersion":"nico.homystack.io/v1alpha1","kind":"KubernetesCluster","metadata":{"name":"prod"},
	 "spec":{"controlPlane":{"machines":["cp-1"]},"rollout":{"stepTimeout":"2m"}}}`
	c, err := DecodeKubernetesCluster([]byte(good))
	if err != nil || c.Spec.ControlPlane.Machines[0] != "cp-1" || c.Spec.Rollout.StepTimeout != Duration(2*time.Minute) {
		t.Fatalf("decode: %+v, %v", c, err)
	}
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"unknown fields everywhere", `{"apiVersion":"nico.homystack.io/v1alpha1","kind":"KubernetesCluster","metadata":{"name":"p","labels":{}},
		  "spec":{"controlPlane":{"machines":["cp-1"],"replicas":3},"etcd":{"provider":"nico","prefix":"/x"}}}`,
			[]string{"metadata.labels: map[] is not accepted: unknown field", "spec.controlPlane.replicas: 3 is not accepted: unknown field",
				"spec.etcd.prefix", "use the fields external, namespace, provider"}},
		{"unknown and invalid together", `{"apiVersion":"nico.homystack.io/v1alpha1","kind":"KubernetesCluster","metadata":{"name":"p"},
		  "spec":{"controlPlane":{"count":-1,"size":1}}}`,
			[]string{"spec.controlPlane.size", "unknown field", "spec.controlPlane.count: -1", "negative"}},
		{"case differs", `{"apiVersion":"nico.homystack.io/v1alpha1","kind":"KubernetesCluster","metadata":{"name":"p"},"spec":{"GitRepo":"x","controlPlane":{"machines":["a"]}}}`,
			[]string{"spec.GitRepo", "unknown field"}},
		{"wrong type", `{"apiVersion":"nico.homystack.io/v1alpha1","kind":"KubernetesCluster","metadata":{"name":"p"},"spec":{"controlPlane":{"count":"two"}}}`,
			[]string{"spec.controlPlane.count", "a JSON string where a whole number belongs"}},
		{"bad duration", `{"apiVersion":"nico.homystack.io/v1alpha1","kind":"KubernetesCluster","metadata":{"name":"p"},"spec":{"controlPlane":{"machines":["a"]},"rollout":{"stepTimeout":"soon"}}}`,
			[]string{`spec.rollout.stepTimeout: "soon"`, "a duration as 90s"}},
		{"then validated", `{"apiVersion":"v1","kind":"KubernetesCluster","metadata":{"name":"p"},"spec":{"controlPlane":{"machines":["a"]}}}`,
			[]string{`apiVersion: "v1"`}},
		{"not JSON", `{`, []string{"not a JSON document"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeKubernetesCluster([]byte(tc.doc))
			checkRefusal(t, err, tc.want)
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	cases := []struct {
		name   string
		change func(old, next *KubernetesCluster)
		want   []string
	}{
		{"machines change", func(_, n *KubernetesCluster) { n.Spec.ControlPlane.Machines = []string{"cp-1"} }, nil},
		{"patch up", func(_, n *KubernetesCluster) { n.Spec.Version = "1.37.3" }, nil},
		{"external endpoints move", func(o, n *KubernetesCluster) {
			o.Spec.Etcd = ClusterEtcd{Provider: EtcdProviderExternal, External: &ExternalEtcd{Endpoints: []string{"https://a:2379"}, SecretRef: "e"}}
			n.Spec.Etcd = ClusterEtcd{Provider: EtcdProviderExternal, External: &ExternalEtcd{Endpoints: []string{"https://b:2379"}, SecretRef: "e"}}
		}, nil},
		{"namespace switched on", func(_, n *KubernetesCluster) { n.Spec.Etcd.Namespace = true },
			[]string{`spec.etcd.namespace: true is not accepted`, "under /clusters/", "nico does not move them", "keep spec.etcd.namespace: false"}},
		{"provider change", func(_, n *KubernetesCluster) { n.Spec.Etcd.Provider = EtcdProviderDistribution },
			[]string{`spec.etcd.provider: "distribution" is not accepted`, "live on provider nico", "no documented migration from nico to distribution", "keep provider nico"}},
		{"explicit default is no change", func(_, n *KubernetesCluster) { n.Spec.Etcd.Provider = EtcdProviderNico }, nil},
		{"endpoint change", func(_, n *KubernetesCluster) { n.Spec.ControlPlaneEndpoint = "10.0.0.5" },
			[]string{`spec.controlPlaneEndpoint: "10.0.0.5"`, "immutable", `keep "k8s.example.org:6443"`}},
		{"two minors", func(o, n *KubernetesCluster) { o.Spec.Version = "1.35.4" },
			[]string{`spec.version: "1.37.2" is not accepted: from the stored spec.version 1.35.4 to 1.37.2: 2 minors up`, "upgrade to 1.36.x first"}},
		{"unfinished roll", func(o, n *KubernetesCluster) {
			o.Spec.Version, o.Status.Version, n.Spec.Version = "1.36.0", "1.35.2", "1.37.0"
		},
			[]string{"from the version the machines run (status.version) 1.35.2 to 1.37.0: 2 minors up"}},
		{"kubelet patch up on its own", func(o, n *KubernetesCluster) {
			o.Spec.DataPlane.Kubelet.Version = "1.36.1"
			n.Spec.DataPlane.Kubelet.Version = "1.36.2"
		}, nil},
		{"kubelet back to the cluster's version, one minor up", func(o, n *KubernetesCluster) { o.Spec.DataPlane.Kubelet.Version = "1.36.1" }, nil},
		{"kubelet two minors up", func(o, n *KubernetesCluster) {
			o.Spec.DataPlane.Kubelet.Version = "1.34.0"
		}, []string{`spec.dataPlane.kubelet.version: "1.37.2" is not accepted: kubelet from 1.34.0 to 1.37.2: 3 minors up`, "upgrade to 1.35.x first"}},
		{"scheduler a minor down", func(o, n *KubernetesCluster) { n.Spec.ControlPlane.Components.Scheduler.Version = "1.36.0" },
			[]string{`spec.controlPlane.components.scheduler.version: "1.36.0" is not accepted: kube-scheduler from 1.37.2 to 1.36.0: a minor down`}},
		{"component following spec.version is checked there only", func(o, n *KubernetesCluster) { o.Spec.Version = "1.35.0" },
			[]string{"spec.version"}},
		{"deleting", func(o, _ *KubernetesCluster) { now := time.Unix(100, 0); o.Metadata.DeletionTimestamp = &now },
			[]string{"being deleted", "--wait"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old, next := validCluster(), validCluster()
			tc.change(old, next)
			checkRefusal(t, ValidateUpdate(old, next), tc.want)
		})
	}
}

func TestVersionChangeOrder(t *testing.T) {
	old := validCluster()
	old.Spec.Version = "1.36.4"
	for _, tc := range []struct {
		to      string
		cpFirst bool
	}{{"1.37.2", true}, {"1.36.5", true}, {"1.36.4", false}, {"1.36.1", false}} {
		spec := old.Spec
		spec.Version = tc.to
		c, err := VersionChange(old, spec)
		if err != nil || c.ControlPlaneFirst != tc.cpFirst {
			t.Errorf("1.36.4 -> %s: %v, %v; want control plane first = %v", tc.to, c, err, tc.cpFirst)
		}
	}
}

func TestCheckFleetEtcd(t *testing.T) {
	s := validCluster().Spec
	if errs := s.CheckFleetEtcd([]string{"3.6.16", "3.7.3"}); len(errs) != 0 {
		t.Fatalf("1.37 over 3.6/3.7 refused: %v", errs)
	}
	s.Version = "1.33.1"
	errs := s.CheckFleetEtcd([]string{"3.6.16", "3.6.16"})
	if len(errs) != 1 {
		t.Fatalf("1.33 over 3.6: %v, want one refusal", errs)
	}
	checkRefusal(t, errs[0], []string{`spec.version: "1.33.1"`, "the fleet's etcd runs 3.6.16", "etcd 3.5.24 to 3.5.x"})
	s.Etcd.Provider = EtcdProviderDistribution
	if errs := s.CheckFleetEtcd([]string{"3.6.16"}); len(errs) != 0 {
		t.Fatalf("provider distribution checked against the fleet: %v", errs)
	}
}
