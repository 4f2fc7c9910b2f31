package api

import "time"

// KindKubernetesCluster is the kind of a Kubernetes cluster declared over
// the fleet's machines.
const KindKubernetesCluster = "KubernetesCluster"

// KubernetesCluster turns machines into a Kubernetes cluster whose
// distribution lives in the user's flake; nico selects the machines,
// delivers cluster.nix, the PKI and tokens through a Rollout, orders the
// control-plane components and publishes the kubeconfig. People write
// metadata and spec (nicoctl apply -f); the leader's cluster controller
// writes status.
type KubernetesCluster struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta              `json:"metadata"`
	Spec     KubernetesClusterSpec   `json:"spec"`
	Status   KubernetesClusterStatus `json:"status"`
}

// KubernetesClusterSpec is the desired cluster.
type KubernetesClusterSpec struct {
	// GitRepo is the flake's repository ("": the coordinator's
	// default repository).
	// Validation: no leading or trailing space.
	GitRepo string `json:"gitRepo,omitempty"`
	// ConfigurationSubdir is the flake's directory inside the repository.
	// Validation: a clean relative directory inside the repository, as k3s or
	// clusters/prod.
	ConfigurationSubdir string `json:"configurationSubdir,omitempty"`
	// CredentialsRef names the secret with the repository's credentials,
	// as NixosConfigurationSpec.CredentialsRef.
	// Validation: a secret's name, 1 to 63 letters, digits, '.', '_' and '-'.
	CredentialsRef string `json:"credentialsRef,omitempty"`
	// ControlPlane are the machines that run the API servers,
	// controller-managers and schedulers (at least one), and how those
	// components run.
	// Validation: at least one machine.
	ControlPlane ControlPlaneSpec `json:"controlPlane"`
	// DataPlane are the worker machines (none when empty), and how the
	// kubelets run.
	// Validation: no machine also in controlPlane.machines.
	DataPlane DataPlaneSpec `json:"dataPlane,omitzero"`
	// Version is the Kubernetes version the flake deploys, as "1.37.2" or
	// "v1.37.2" ("": not checked, no version roll ordering). See package
	// kubeversion for the changes accepted.
	// Validation: MAJOR.MINOR.PATCH of a minor in nico's Kubernetes version
	// table; a change goes one minor at a time and must support the fleet's
	// etcd (provider nico).
	Version string `json:"version,omitempty"`
	// ControlPlaneEndpoint is the address clients use, host or host:port
	// (a VIP or a DNS name; "": the first ready control-plane machine's
	// address, port 6443).
	// Validation: host or host:port, the host an IP address or DNS name, as
	// 10.0.0.100 or k8s.example.org:6443; immutable once created.
	ControlPlaneEndpoint string `json:"controlPlaneEndpoint,omitempty"`
	// Etcd says where the API servers keep their data.
	Etcd ClusterEtcd `json:"etcd,omitzero"`
	// Rollout holds the knobs passed to the cluster's Rollout.
	Rollout ClusterRollout `json:"rollout,omitzero"`
	// Probes say which components the control-plane agents probe and how.
	Probes ClusterProbes `json:"probes,omitzero"`
	// Drain, when set, drains a machine from Kubernetes before it is
	// released from the cluster.
	Drain *DrainHook `json:"drain,omitempty"`
	// Kubeconfig says where the published admin kubeconfig comes from.
	Kubeconfig KubeconfigSource `json:"kubeconfig,omitzero"`
}

// MachineSet selects the machines of one plane: the named Machines, else up
// to Count machines matching MachineSelector.
type MachineSet struct {
	// Machines are explicit machine names; they take precedence, and a
	// selector beside them is refused.
	// Validation: each non-empty, without '/' or spaces, and named once.
	Machines []string `json:"machines,omitempty"`
	// MachineSelector matches discoverable machines with no configuration.
	// Validation: not beside machines; label keys and values by Kubernetes'
	// label syntax.
	MachineSelector *MachineSelector `json:"machineSelector,omitempty"`
	// Count is how many matching machines to take (with a selector), or
	// how many the plane wants in all (with machinePool).
	// Validation: 1 or more with machineSelector or machinePool; left out
	// with machines.
	Count int `json:"count,omitempty"`
	// MachinePool names the MachinePool that VMs come from when fewer
	// than count free machines match the selector (without a selector,
	// every machine of the plane is a VM): the cluster's controller writes
	// the plane's MachineClaim (<cluster>-controlplane or
	// <cluster>-dataplane) and only that; the plane takes its claim's VMs
	// first, and no other cluster takes them. Deleting the cluster
	// destroys the VMs it asked for and no others.
	// Validation: "" or a DNS label (a pool's name); not beside machines;
	// with count.
	MachinePool string `json:"machinePool,omitempty"`
}

// Empty tells whether the set selects nothing.
func (s MachineSet) Empty() bool {
	return len(s.Machines) == 0 && s.MachineSelector == nil && s.Count == 0 && s.MachinePool == ""
}

// MachineSelector selects machines by label, as Kubernetes' label
// selectors do (matchLabels only).
type MachineSelector struct {
	// MatchLabels: a machine matches when it has every pair.
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// Matches tells whether labels carry every pair of the selector.
func (s *MachineSelector) Matches(labels map[string]string) bool {
	if s == nil {
		return false
	}
	for k, v := range s.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// EtcdProvider says who provides a cluster's datastore.
type EtcdProvider string

// etcd providers.
const (
	// EtcdProviderNico (the default): the fleet's etcd, under the
	// cluster's prefix, with an etcd user and role that reach it only.
	EtcdProviderNico EtcdProvider = "nico"
	// EtcdProviderExternal: endpoints and a secret the user gives.
	EtcdProviderExternal EtcdProvider = "external"
	// EtcdProviderDistribution: the distribution runs its own datastore
	// (k3s's embedded etcd); nico orders the control-plane joins.
	EtcdProviderDistribution EtcdProvider = "distribution"
)

// EtcdProviders are the accepted providers, default first.
var EtcdProviders = []EtcdProvider{EtcdProviderNico, EtcdProviderExternal, EtcdProviderDistribution}

// ClusterEtcd is a cluster's datastore.
type ClusterEtcd struct {
	// Provider is nico ("" too), external or distribution.
	// Validation: nico, external or distribution; no change once created (no
	// migration between providers).
	Provider EtcdProvider `json:"provider,omitempty"`
	// External is required with provider external, refused otherwise.
	// Validation: given exactly when provider is external.
	External *ExternalEtcd `json:"external,omitempty"`
	// Namespace (provider nico only) is for distributions that cannot set
	// an etcd key prefix of their own (k3s: its bootstrap keys and
	// /registry): the cluster's etcd role then reaches all of
	// ClusterEtcdNamespace and cluster.nix asks each server to run a
	// namespacing proxy (nico-etcd-proxy, package etcdnsproxy) the
	// distribution talks to. false: the API servers use --etcd-prefix (ClusterEtcdPrefix).
	// Validation: with provider nico only; no change once created.
	Namespace bool `json:"namespace,omitempty"`
}

// ProviderOrDefault is Provider, nico when empty.
func (e ClusterEtcd) ProviderOrDefault() EtcdProvider {
	if e.Provider == "" {
		return EtcdProviderNico
	}
	return e.Provider
}

// ExternalEtcd is an etcd cluster nico does not run.
type ExternalEtcd struct {
	// Endpoints are the client URLs (https://host:2379).
	// Validation: at least one http or https URL with a host and port and no
	// path, as https://10.0.0.9:2379.
	Endpoints []string `json:"endpoints"`
	// SecretRef names the secret with the client identity: keys ca.crt,
	// tls.crt and tls.key.
	// Validation: a secret's name, 1 to 63 letters, digits, '.', '_' and '-'.
	SecretRef string `json:"secretRef"`
}

// ClusterEtcdPrefix is the key prefix the API servers of cluster name use
// in the fleet's etcd (provider nico): --etcd-prefix.
func ClusterEtcdPrefix(name string) string { return "/clusters/" + name + "/registry" }

// ClusterEtcdNamespace is the namespace the proxy of cluster name prefixes
// every key with (spec.etcd.namespace): /clusters/<name>/, with its
// trailing slash, so that every key the distribution names lies inside it
// (its "/registry/x" is stored at "/clusters/<name>//registry/x").
func ClusterEtcdNamespace(name string) string { return "/clusters/" + name + "/" }

// ClusterRollout holds the strategy knobs of the cluster's Rollout.
type ClusterRollout struct {
	// MaxUnavailable is RolloutSpec.MaxUnavailable for the data plane.
	// Default: 1.
	// Validation: a number of 1 or more, or a percentage from 1% to 100%.
	MaxUnavailable string `json:"maxUnavailable,omitempty"`
	// StepTimeout is RolloutSpec.StepTimeout.
	// Default: 10m.
	// Validation: 0 or at least 1s.
	StepTimeout Duration `json:"stepTimeout,omitempty"`
	// Paused is RolloutSpec.Paused.
	Paused bool `json:"paused,omitempty"`
}

// ClusterProbes say what the agent on each control-plane machine probes.
// A nil component probe is its default; Disabled turns one off (a flake
// that does not run the component).
type ClusterProbes struct {
	// APIServer defaults to https://127.0.0.1:6443/readyz checked with the
	// cluster CA.
	APIServer *ComponentProbe `json:"apiServer,omitempty"`
	// ControllerManager defaults to https://127.0.0.1:10257/healthz and
	// the lease kube-system/kube-controller-manager.
	ControllerManager *ComponentProbe `json:"controllerManager,omitempty"`
	// Scheduler defaults to https://127.0.0.1:10259/healthz and the lease
	// kube-system/kube-scheduler.
	Scheduler *ComponentProbe `json:"scheduler,omitempty"`
	// Interval is the time between probes (10s when zero).
	// Validation: 0 or at least 1s.
	Interval Duration `json:"interval,omitempty"`
	// Timeout bounds one probe (5s when zero).
	// Validation: 0 or at least 100ms.
	Timeout Duration `json:"timeout,omitempty"`
}

// ComponentProbe is how one component is probed.
type ComponentProbe struct {
	// Disabled: the component is not probed and its condition follows
	// the API server's.
	Disabled bool `json:"disabled,omitempty"`
	// URL is the health endpoint, https or http, on the machine.
	// Validation: an http or https URL with a host.
	URL string `json:"url,omitempty"`
	// CAFile is the CA the endpoint's certificate is checked with, a path
	// on the machine ("": the cluster CA for the API server; the
	// component's self-signed serving certificate is accepted for the
	// controller-manager and the scheduler).
	// Validation: a clean absolute path.
	CAFile string `json:"caFile,omitempty"`
	// LeaderLease is "namespace/name" of the component's leader-election
	// lease, read through the API server ("": none checked).
	// Validation: namespace/name, as kube-system/kube-scheduler.
	LeaderLease string `json:"leaderLease,omitempty"`
}

// Default component probes.
var (
	DefaultAPIServerProbe         = ComponentProbe{URL: "https://127.0.0.1:6443/readyz"}
	DefaultControllerManagerProbe = ComponentProbe{URL: "https://127.0.0.1:10257/healthz",
		LeaderLease: "kube-system/kube-controller-manager"}
	DefaultSchedulerProbe = ComponentProbe{URL: "https://127.0.0.1:10259/healthz",
		LeaderLease: "kube-system/kube-scheduler"}
)

// WithDefaults returns p with every nil probe and zero duration set to
// its default.
func (p ClusterProbes) WithDefaults() ClusterProbes {
	fill := func(c *ComponentProbe, d ComponentProbe) *ComponentProbe {
		if c == nil {
			return &d
		}
		out := *c
		if out.URL == "" {
			out.URL = d.URL
		}
		if out.LeaderLease == "" {
			out.LeaderLease = d.LeaderLease
		}
		return &out
	}
	p.APIServer = fill(p.APIServer, DefaultAPIServerProbe)
	p.ControllerManager = fill(p.ControllerManager, DefaultControllerManagerProbe)
	p.Scheduler = fill(p.Scheduler, DefaultSchedulerProbe)
	if p.Interval == 0 {
		p.Interval = Duration(10 * time.Second)
	}
	if p.Timeout == 0 {
		p.Timeout = Duration(5 * time.Second)
	}
	return p
}

// DrainHook drains a machine from Kubernetes before the cluster releases
// it.
type DrainHook struct {
	// Command runs on a ready control-plane machine (through its agent,
	// not a shell), with NICO_DRAIN_NODE set to the leaving machine's
	// name, NICO_DRAIN_CLUSTER to the cluster's and KUBECONFIG to the
	// admin kubeconfig (spec.kubeconfig.path when set); $NICO_DRAIN_NODE
	// and $NICO_DRAIN_CLUSTER in its arguments are replaced by their
	// values, as in ["kubectl", "drain", "--ignore-daemonsets",
	// "--delete-emptydir-data", "$NICO_DRAIN_NODE"]. Exit 0 is drained;
	// anything else holds the machine until the hook changes.
	// Validation: a non-empty program name first.
	Command []string `json:"command"`
	// Timeout bounds the drain (10 minutes when zero); on timeout the
	// machine is not released and the cluster says why.
	// Validation: 0 or more.
	Timeout Duration `json:"timeout,omitempty"`
}

// KubeconfigSource says where the published admin kubeconfig comes from.
type KubeconfigSource struct {
	// Path is a kubeconfig the distribution writes on control-plane
	// machines (k3s: /etc/rancher/k3s/k3s.yaml); the agent publishes it
	// with its server rewritten to the control-plane endpoint. "": the
	// leader writes one from the cluster CA.
	// Validation: a clean absolute path.
	Path string `json:"path,omitempty"`
}
