package api

import (
	"slices"
	"time"
)

// KindKubeconfigReport is the kind of a control-plane agent's report on
// publishing a distribution's own kubeconfig (spec.kubeconfig.path).
const KindKubeconfigReport = "KubeconfigReport"

// KubeconfigReport says whether the publisher of a cluster (see
// KubeconfigPublisher) published the kubeconfig its distribution wrote at
// spec.kubeconfig.path, as the sealed secret KubeconfigSecretName with its
// server rewritten to the control-plane endpoint, and if not, why. That
// machine's agent writes it; the leader's cluster controller reads it into
// the CondKubeconfigPublished condition and status.kubeconfigSecret.
type KubeconfigReport struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta             `json:"metadata"`
	Status   KubeconfigReportStatus `json:"status"`
}

// KubeconfigReportStatus is the last publication attempt.
type KubeconfigReportStatus struct {
	// Machine is the publisher; Path the file it read.
	Machine string `json:"machine"`
	Path    string `json:"path"`
	// Published: the secret holds the file's kubeconfig, rewritten.
	Published bool `json:"published"`
	// Server is the server the published kubeconfig names.
	Server string `json:"server,omitempty"`
	// Digest is the published value's SHA-256 (hex).
	Digest string `json:"digest,omitempty"`
	// Message says why it is not published (the path and the error).
	Message string `json:"message,omitempty"`
	// PublishedAt is when the secret last changed.
	PublishedAt time.Time `json:"publishedAt,omitzero"`
}

// NewKubeconfigReport returns cluster's report.
func NewKubeconfigReport(cluster string) *KubeconfigReport {
	return &KubeconfigReport{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindKubeconfigReport}, Metadata: ObjectMeta{Name: cluster}}
}

// GetTypeMeta implements Object.
func (r *KubeconfigReport) GetTypeMeta() *TypeMeta { return &r.TypeMeta }

// GetMetadata implements Object.
func (r *KubeconfigReport) GetMetadata() *ObjectMeta { return &r.Metadata }

// CondKubeconfigPublished is the KubernetesCluster condition of a
// distribution's kubeconfig (spec.kubeconfig.path): true once published,
// false naming the machine, the path and why not.
const CondKubeconfigPublished = "KubeconfigPublished"

// KubeconfigPublisher is the control-plane machine whose agent publishes
// the distribution's kubeconfig of c: the first of its ready control-plane
// machines by name ("" while none is ready), so that one agent writes it.
func (c *KubernetesCluster) KubeconfigPublisher() string {
	ready := slices.Clone(c.Status.ControlPlane.ReadyMachines)
	slices.Sort(ready)
	if len(ready) == 0 {
		return ""
	}
	return ready[0]
}
