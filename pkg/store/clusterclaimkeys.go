package store

// Keys of the Kubernetes cluster controller and the agents' component
// probes.
const (
	// ClusterClaimsDir holds one key per machine a KubernetesCluster holds,
	// its value the cluster's name: a claim is created only while absent,
	// so that two clusters never hold one machine.
	ClusterClaimsDir = "clusterclaims/"
	// ComponentReportsDir holds each control-plane machine's report of
	// its Kubernetes components (api.ComponentReport).
	ComponentReportsDir = "componentreports/"
)

// ClusterClaimKey is the claim on machine.
func ClusterClaimKey(machine string) string { return ClusterClaimsDir + machine }

// ComponentReportKey is where machine reports its Kubernetes components.
func ComponentReportKey(machine string) string { return ComponentReportsDir + machine }

// DrainRequestsDir holds one api.DrainRequest per machine being drained
// from a KubernetesCluster (the leader writes the spec, the runner's
// agent the status).
const DrainRequestsDir = "drainrequests/"

// DrainRequestKey is the drain request of machine.
func DrainRequestKey(machine string) string { return DrainRequestsDir + machine }

// KubeconfigReportsDir holds one api.KubeconfigReport per cluster whose
// distribution writes its own kubeconfig (its publisher's agent writes it).
const KubeconfigReportsDir = "kubeconfigreports/"

// KubeconfigReportKey is the kubeconfig report of cluster.
func KubeconfigReportKey(cluster string) string { return KubeconfigReportsDir + cluster }
