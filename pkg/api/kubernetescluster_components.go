package api

// ControlPlaneSpec selects the control-plane machines (the MachineSet
// fields, inline) and says how their components run.
type ControlPlaneSpec struct {
	MachineSet `json:",inline"`
	// Components are the API server, controller-manager and scheduler of
	// every control-plane machine.
	Components ControlPlaneComponents `json:"components,omitzero"`
}

// DataPlaneSpec selects the worker machines (the MachineSet fields,
// inline) and says how their kubelets run.
type DataPlaneSpec struct {
	MachineSet `json:",inline"`
	// Kubelet is the kubelet of every machine of the cluster that runs one
	// (every data-plane machine, and the control-plane machines whose
	// flake runs one).
	Kubelet ComponentSpec `json:"kubelet,omitzero"`
}

// ControlPlaneComponents are the control plane's components.
type ControlPlaneComponents struct {
	// APIServer is kube-apiserver.
	APIServer ComponentSpec `json:"apiServer,omitzero"`
	// ControllerManager is kube-controller-manager.
	ControllerManager ComponentSpec `json:"controllerManager,omitzero"`
	// Scheduler is kube-scheduler.
	Scheduler ComponentSpec `json:"scheduler,omitzero"`
}

// Part names one Kubernetes component of a cluster, as cluster.nix's
// components attribute names it.
type Part string

// The components a KubernetesCluster describes, in the order a
// control-plane machine starts them (each needs the one before it).
const (
	PartAPIServer         Part = "apiServer"
	PartControllerManager Part = "controllerManager"
	PartScheduler         Part = "scheduler"
	PartKubelet           Part = "kubelet"
)

// Parts are every component, in start order.
var Parts = []Part{PartAPIServer, PartControllerManager, PartScheduler, PartKubelet}

// Field is the component's path in a KubernetesCluster.
func (c Part) Field() string {
	if c == PartKubelet {
		return "spec.dataPlane.kubelet"
	}
	return "spec.controlPlane.components." + string(c)
}

// Binary is the component's program, as its flags are documented.
func (c Part) Binary() string {
	switch c {
	case PartAPIServer:
		return "kube-apiserver"
	case PartControllerManager:
		return "kube-controller-manager"
	case PartScheduler:
		return "kube-scheduler"
	}
	return "kubelet"
}

// Component returns the spec of component c.
func (s KubernetesClusterSpec) Component(c Part) ComponentSpec {
	switch c {
	case PartAPIServer:
		return s.ControlPlane.Components.APIServer
	case PartControllerManager:
		return s.ControlPlane.Components.ControllerManager
	case PartScheduler:
		return s.ControlPlane.Components.Scheduler
	}
	return s.DataPlane.Kubelet
}

// ComponentProvider says who runs a component.
type ComponentProvider string

// Component providers.
const (
	// ComponentNative (the default): the cluster's flake runs it on the
	// cluster's machines.
	ComponentNative ComponentProvider = "native"
	// ComponentExternal: something other than the flake runs it; nico
	// only checks its readiness at External.URL.
	ComponentExternal ComponentProvider = "external"
)

// ComponentSpec is how one component runs.
type ComponentSpec struct {
	// Provider is native ("" too: the flake runs the component) or
	// external (nico only checks its readiness at external.url).
	// Default: native.
	// Validation: native or external; external needs external.url.
	Provider ComponentProvider `json:"provider,omitempty"`
	// Version is the component's Kubernetes version ("": the cluster's
	// spec.version), for a component that runs behind or ahead of the
	// others within Kubernetes' version skew policy.
	// Default: spec.version.
	// Validation: MAJOR.MINOR.PATCH of a minor in nico's Kubernetes version
	// table; the controller-manager and scheduler at most one minor older
	// than the API server and never newer, the kubelet at most three; a
	// change goes as spec.version's (a patch, or one minor up).
	Version string `json:"version,omitempty"`
	// ExtraArgs are flags added to the component's command line, by name
	// without the leading "--" ({"audit-log-maxage": "7"} is
	// --audit-log-maxage=7). The flags nico owns (the etcd servers and
	// prefix, the certificates and keys it delivers, bootstrap-token
	// authentication, ...) are refused.
	// Validation: names of lower-case letters, digits and '-' starting with a
	// letter, not a flag nico owns; values without a newline.
	ExtraArgs map[string]string `json:"extraArgs,omitempty"`
	// Resources bound the component's unit (systemd CPUQuota and
	// MemoryMax).
	Resources ComponentResources `json:"resources,omitzero"`
	// External is where an external component's readiness is checked;
	// given exactly with provider external.
	// Validation: given exactly when provider is external.
	External *ExternalComponent `json:"external,omitempty"`
}

// ProviderOrDefault is Provider, native when empty.
func (c ComponentSpec) ProviderOrDefault() ComponentProvider {
	if c.Provider == "" {
		return ComponentNative
	}
	return c.Provider
}

// VersionOr is Version, else the cluster's version v.
func (c ComponentSpec) VersionOr(v string) string {
	if c.Version != "" {
		return c.Version
	}
	return v
}

// ComponentResources are a component's resource limits, in Kubernetes'
// quantity notation.
type ComponentResources struct {
	// CPU is the most CPU time the unit gets, in cores: "2", "0.5" or
	// "500m" (systemd CPUQuota=50%); "" is no limit.
	// Validation: a positive number of cores, as 2, 0.5 or 500m.
	CPU string `json:"cpu,omitempty"`
	// Memory is the most memory the unit may use (systemd MemoryMax):
	// bytes, or with a suffix Ki, Mi, Gi, Ti (powers of 1024) or k, M, G,
	// T (powers of 1000), as 512Mi; "" is no limit.
	// Validation: a positive number of bytes of at least 1Mi, as 512Mi or 2G.
	Memory string `json:"memory,omitempty"`
}

// ExternalComponent is a component nico does not run.
type ExternalComponent struct {
	// URL is the component's readiness endpoint, probed from each
	// control-plane machine's agent in place of the component's probe
	// (spec.probes); an external kubelet's readiness stays its Node's.
	// Validation: an http or https URL with a host, as
	// https://10.0.0.5:6443/readyz.
	URL string `json:"url"`
	// CAFile is the CA its certificate is checked with, a path on the
	// control-plane machines ("": as spec.probes says: the cluster CA for
	// the API server; for the others their probe's caFile, else their
	// self-signed certificate accepted).
	// Validation: a clean absolute path.
	CAFile string `json:"caFile,omitempty"`
}

// EffectiveProbes are the probes the control-plane agents run: Probes,
// with each external control-plane component probed at its external.url
// (and caFile, when given) instead of on the machine. Defaults are
// filled in later (ClusterProbes.WithDefaults) as for Probes.
func (s KubernetesClusterSpec) EffectiveProbes() ClusterProbes {
	p := s.Probes
	for _, c := range []struct {
		part  Part
		probe **ComponentProbe
	}{{PartAPIServer, &p.APIServer}, {PartControllerManager, &p.ControllerManager}, {PartScheduler, &p.Scheduler}} {
		spec := s.Component(c.part)
		if spec.ProviderOrDefault() != ComponentExternal || spec.External == nil {
			continue
		}
		probe := ComponentProbe{}
		if *c.probe != nil {
			probe = **c.probe
		}
		probe.Disabled = false
		probe.URL = spec.External.URL
		if spec.External.CAFile != "" {
			probe.CAFile = spec.External.CAFile
		}
		*c.probe = &probe
	}
	return p
}
