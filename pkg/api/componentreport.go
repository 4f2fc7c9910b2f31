package api

import "time"

// KindComponentReport is the kind of a machine's report of the Kubernetes
// components it runs.
const KindComponentReport = "ComponentReport"

// ComponentReport is what the agent on one control-plane machine of a
// KubernetesCluster last observed of the components its flake runs (the
// API server, controller-manager, scheduler), probed as the cluster's
// spec.probes says. The machine's agent writes it; the leader's cluster
// controller reads it into the cluster's conditions.
type ComponentReport struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta            `json:"metadata"`
	Status   ComponentReportStatus `json:"status"`
}

// ComponentReportStatus is one round of probes.
type ComponentReportStatus struct {
	// Cluster is the KubernetesCluster the machine belongs to.
	Cluster string `json:"cluster"`
	// Components are the probed components, by name (ComponentAPIServer,
	// ...); a disabled probe is absent.
	Components []ComponentHealth `json:"components,omitempty"`
	// CheckedAt is when the round written ended.
	CheckedAt time.Time `json:"checkedAt"`
	// FreshUntil is when the report goes stale, counting as no report,
	// unless rewritten. The agent writes its report when a round finds
	// something else than the last one written, and otherwise again
	// before this time; the report is bound to the agent's heartbeat
	// lease and goes with it. Zero (a report written without it): three
	// probe intervals after CheckedAt.
	FreshUntil time.Time `json:"freshUntil,omitempty"`
}

// Fresh tells whether r is a report of cluster's components that is not
// stale at now; interval is the cluster's probe interval.
func (r *ComponentReport) Fresh(cluster string, now time.Time, interval time.Duration) bool {
	if r == nil || r.Status.Cluster != cluster {
		return false
	}
	if !r.Status.FreshUntil.IsZero() {
		return !now.After(r.Status.FreshUntil)
	}
	return now.Sub(r.Status.CheckedAt) <= 3*interval
}

// ComponentHealth is one component's probe.
type ComponentHealth struct {
	Name    string `json:"name"`
	Healthy bool   `json:"healthy"`
	// Message says what failed ("" when healthy).
	Message string `json:"message,omitempty"`
	// LeaderHolder is the holder identity of the component's leader
	// lease, as the API server returned it ("" not probed or none).
	LeaderHolder string `json:"leaderHolder,omitempty"`
	// HoldsLease: the lease is held by this machine's replica.
	HoldsLease bool `json:"holdsLease,omitempty"`
}

// Component returns the health of component name, or nil.
func (r *ComponentReport) Component(name string) *ComponentHealth {
	for i := range r.Status.Components {
		if r.Status.Components[i].Name == name {
			return &r.Status.Components[i]
		}
	}
	return nil
}

// NewComponentReport returns machine's report.
func NewComponentReport(machine string) *ComponentReport {
	return &ComponentReport{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindComponentReport}, Metadata: ObjectMeta{Name: machine}}
}

// GetTypeMeta implements Object.
func (r *ComponentReport) GetTypeMeta() *TypeMeta { return &r.TypeMeta }

// GetMetadata implements Object.
func (r *ComponentReport) GetMetadata() *ObjectMeta { return &r.Metadata }
