package config

import "time"

// Drain is how this control-plane machine's agent runs the drain hooks
// its KubernetesClusters ask of it (agent.DrainConfig).
type Drain struct {
	// Kubeconfig ("drain.kubeconfig") is KUBECONFIG for a drain request
	// that names none; "": the admin kubeconfig nico delivers.
	Kubeconfig string
	// Resync ("drain.resync") is how often the drain requests are re-read
	// besides their watch.
	Resync time.Duration
	// OutputTail ("drain.outputTail") is how many of the last bytes of a
	// drain command's output the agent keeps in the request's status.
	OutputTail int
}

// KubeconfigPublish is how this control-plane machine's agent publishes a
// distribution's own kubeconfig (agent.KubeconfigPublishConfig).
type KubeconfigPublish struct {
	// Interval ("kubeconfigPublish.interval") is how often the file at the
	// cluster's spec.kubeconfig.path is re-read.
	Interval time.Duration
}

// Defaults of the drain.* and kubeconfigPublish.* keys.
const (
	DefaultDrainResync               = 30 * time.Second
	DefaultDrainOutputTail           = 2048
	DefaultKubeconfigPublishInterval = 10 * time.Second
)

// clusterHookKeys are the agent's drain.* and kubeconfigPublish.* keys,
// bound to d and k.
func clusterHookKeys(d *Drain, k *KubeconfigPublish) []key {
	return []key{
		stringKey("drain.kubeconfig", &d.Kubeconfig, "", "KUBECONFIG this machine's agent gives a KubernetesCluster's drain command when the cluster names no spec.kubeconfig.path; empty: the admin kubeconfig nico delivers (/etc/kubernetes/admin.conf)", absPath(true)),
		durationKey("drain.resync", &d.Resync, DefaultDrainResync, "how often this machine's agent re-reads the drain requests it runs, besides watching them", between(time.Second, time.Hour, false)),
		intKey("drain.outputTail", &d.OutputTail, DefaultDrainOutputTail, "how many of the last bytes of a drain command's output (standard output and error) this machine's agent keeps in the DrainRequest's status and the MachinesDrained condition", intBetween(256, 65536, "bytes")),
		durationKey("kubeconfigPublish.interval", &k.Interval, DefaultKubeconfigPublishInterval, "how often this machine's agent re-reads a distribution's own kubeconfig (the cluster's spec.kubeconfig.path) and publishes it when it changed", between(time.Second, time.Hour, false)),
	}
}
