package api

import "time"

// KindDrainRequest is the kind of a request to drain a machine from a
// KubernetesCluster's Kubernetes before the cluster releases it.
const KindDrainRequest = "DrainRequest"

// DrainRequest asks the agent of one ready control-plane machine of a
// cluster (Spec.Runner) to run the cluster's drain hook for Spec.Machine.
// The leader's cluster controller writes its spec, fenced on its term;
// the runner's agent writes its status, only while the request is as it
// read it (a compare-and-swap on the revision), so that a result never
// lands on a request that changed meanwhile. The machine is released
// once Status answers Spec.Attempt with DrainSucceeded.
//
//	(leader writes attempt n) --> runner: Running --exit 0--> Succeeded --> release
//	                                      |
//	                                      +--exit != 0, timeout--> Failed (held)
//	(command or timeout changed, runner not ready,
//	 Failed and its backoff passed) --> leader writes attempt n+1
type DrainRequest struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta         `json:"metadata"`
	Spec     DrainRequestSpec   `json:"spec"`
	Status   DrainRequestStatus `json:"status"`
}

// DrainRequestSpec is one drain the leader asks for.
type DrainRequestSpec struct {
	// Cluster is the KubernetesCluster the machine leaves.
	Cluster string `json:"cluster"`
	// Machine is the machine to drain (NICO_DRAIN_NODE).
	Machine string `json:"machine"`
	// Runner is the control-plane machine whose agent runs Command.
	Runner string `json:"runner"`
	// Command is the cluster's spec.drain.command.
	Command []string `json:"command"`
	// Timeout bounds the command (DefaultDrainTimeout when zero).
	Timeout Duration `json:"timeout,omitempty"`
	// Kubeconfig is the path on the runner KUBECONFIG names ("": the
	// agent's admin kubeconfig, the one nico delivered).
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Attempt counts the leader's asks; a new one (a fixed command,
	// another runner, a retry) is run afresh.
	Attempt int `json:"attempt"`
	// Retry counts the failed attempts of the same hook just before this
	// one (0: a first ask, or the hook changed); the leader waits longer
	// after each (kubeplan.DrainRetryDelay).
	Retry int `json:"retry,omitempty"`
}

// DrainPhase is where one attempt of a drain is.
type DrainPhase string

// Drain phases.
const (
	DrainRunning   DrainPhase = "Running"
	DrainSucceeded DrainPhase = "Succeeded"
	DrainFailed    DrainPhase = "Failed"
)

// DefaultDrainTimeout bounds a drain whose hook gives no timeout.
const DefaultDrainTimeout = 10 * time.Minute

// DrainRequestStatus is what the runner observed of one attempt.
type DrainRequestStatus struct {
	// Attempt is the Spec.Attempt this status answers.
	Attempt int `json:"attempt,omitempty"`
	// Runner is the machine that ran it.
	Runner string     `json:"runner,omitempty"`
	Phase  DrainPhase `json:"phase,omitempty"`
	// ExitCode is the command's exit status (-1: it did not exit by
	// itself: killed at its timeout, or it could not start).
	ExitCode int `json:"exitCode"`
	// TimedOut: the command ran past its timeout and was killed.
	TimedOut bool `json:"timedOut,omitempty"`
	// Output is the tail of its standard output and error.
	Output string `json:"output,omitempty"`
	// Message says what failed, in a sentence.
	Message    string    `json:"message,omitempty"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
}

// NewDrainRequest returns the drain request of machine.
func NewDrainRequest(machine string) *DrainRequest {
	return &DrainRequest{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindDrainRequest}, Metadata: ObjectMeta{Name: machine}}
}

// Answered tells whether the status answers the spec's attempt.
func (d *DrainRequest) Answered() bool {
	return d.Status.Attempt == d.Spec.Attempt && d.Spec.Attempt > 0
}

// TimeoutOrDefault is the request's timeout.
func (s DrainRequestSpec) TimeoutOrDefault() time.Duration {
	if s.Timeout <= 0 {
		return DefaultDrainTimeout
	}
	return time.Duration(s.Timeout)
}

// GetTypeMeta implements Object.
func (d *DrainRequest) GetTypeMeta() *TypeMeta { return &d.TypeMeta }

// GetMetadata implements Object.
func (d *DrainRequest) GetMetadata() *ObjectMeta { return &d.Metadata }

// CondMachinesDrained is the KubernetesCluster condition of the drains of
// the machines it releases (set once a drain hook has run): False while a
// drain runs or after one failed, naming the machine, the exit code and
// the output's tail.
const CondMachinesDrained = "MachinesDrained"

// Reasons of CondMachinesDrained.
const (
	ReasonDraining    = "Draining"
	ReasonDrainFailed = "DrainFailed"
	ReasonNoDrainer   = "NoReadyControlPlane"
	ReasonDrained     = "Drained"
)
