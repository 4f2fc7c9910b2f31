package api

import "time"

// KindSwitchRequest is the kind of a control-plane host's request for the
// switch slot.
const KindSwitchRequest = "SwitchRequest"

// OpSwitch is the operation type that holds the one-change-in-flight slot
// (store.ActiveOpKey) while a control-plane host switches its NixOS
// generation outside a nico rollout (nixos-rebuild, colmena, deploy-rs).
const OpSwitch OpType = "Switch"

// StepSwitching is an OpSwitch operation's step once the host may switch
// (before it, StepTransferLeader while leadership moves off its member).
const StepSwitching OpStep = "Switching"

// SwitchRequest is a control-plane host asking the coordinator's leader
// for the switch slot before it switches to another generation (its
// pre-switch check, nico-agent switch-check). The host's agent writes the
// spec; the leader writes the status, answering one attempt at a time.
//
//	(agent: attempt n) --> leader: Waiting (why) ... --> Granted --> (host switches)
//	                              |                         |
//	                              +--> Refused (why)        +--(agent: switched, member healthy)--> Released
//	                                                        +--(deadline passed)------------------> Expired
type SwitchRequest struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta          `json:"metadata"`
	Spec     SwitchRequestSpec   `json:"spec"`
	Status   SwitchRequestStatus `json:"status"`
}

// SwitchRequestSpec is one ask, written by the host's agent.
type SwitchRequestSpec struct {
	// Attempt names this ask; a new ask (a new switch) has a new one, and
	// a status answers only the attempt it names.
	Attempt string `json:"attempt"`
	// Toplevel is the generation the host switches to (the store path
	// switch-to-configuration runs from).
	Toplevel string `json:"toplevel"`
	// Action is switch-to-configuration's action (switch or test).
	Action string `json:"action,omitempty"`
	// Hold bounds how long the slot is held once granted: past it the
	// leader takes the slot back (DefaultSwitchHold when zero).
	// Validation: MinSwitchHold to MaxSwitchHold.
	Hold        Duration  `json:"hold,omitempty"`
	RequestedAt time.Time `json:"requestedAt"`
	// SwitchedAt is set by the host's agent once /run/current-system is
	// Toplevel, the agent runs that generation's configuration and its
	// member is healthy; the leader then releases the slot.
	SwitchedAt time.Time `json:"switchedAt,omitzero"`
}

// Bounds of SwitchRequestSpec.Hold.
const (
	DefaultSwitchHold = 10 * time.Minute
	MinSwitchHold     = 30 * time.Second
	MaxSwitchHold     = 2 * time.Hour
)

// HoldOrDefault is the spec's hold.
func (s SwitchRequestSpec) HoldOrDefault() time.Duration {
	if s.Hold <= 0 {
		return DefaultSwitchHold
	}
	return time.Duration(s.Hold)
}

// SwitchPhase is where an ask is.
type SwitchPhase string

// Switch phases.
const (
	SwitchWaiting  SwitchPhase = "Waiting"
	SwitchGranted  SwitchPhase = "Granted"
	SwitchRefused  SwitchPhase = "Refused"
	SwitchReleased SwitchPhase = "Released"
	SwitchExpired  SwitchPhase = "Expired"
)

// SwitchRequestStatus is the leader's answer to one attempt.
type SwitchRequestStatus struct {
	// Attempt is the spec.attempt answered.
	Attempt string      `json:"attempt,omitempty"`
	Phase   SwitchPhase `json:"phase,omitempty"`
	// Operation is the operation that holds the slot for the host (an
	// OpSwitch, or the nico rollout step of this host); "" when the host
	// switches without the slot (no etcd member there).
	Operation string `json:"operation,omitempty"`
	// Message says why, in a sentence: what holds the slot, what to do.
	Message   string    `json:"message,omitempty"`
	GrantedAt time.Time `json:"grantedAt,omitzero"`
	// Deadline is when the leader takes the slot back.
	Deadline  time.Time `json:"deadline,omitzero"`
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
}

// Answered tells whether the status answers the spec's attempt.
func (r *SwitchRequest) Answered() bool {
	return r.Spec.Attempt != "" && r.Status.Attempt == r.Spec.Attempt && r.Status.Phase != ""
}

// NewSwitchRequest returns the switch request of node.
func NewSwitchRequest(node string) *SwitchRequest {
	return &SwitchRequest{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindSwitchRequest}, Metadata: ObjectMeta{Name: node}}
}

// GetTypeMeta implements Object.
func (r *SwitchRequest) GetTypeMeta() *TypeMeta { return &r.TypeMeta }

// GetMetadata implements Object.
func (r *SwitchRequest) GetMetadata() *ObjectMeta { return &r.Metadata }
