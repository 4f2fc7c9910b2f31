package api

import "time"

// KindNixosConfiguration is the kind of a machine's desired NixOS configuration.
const KindNixosConfiguration = "NixosConfiguration"

// NixosConfiguration is the NixOS generation desired for one machine, named
// after the machine. The coordinator's leader (or a person) writes spec and
// bumps Spec.Generation for every change; the machine's agent applies it and
// writes status.
type NixosConfiguration struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta               `json:"metadata"`
	Spec     NixosConfigurationSpec   `json:"spec"`
	Status   NixosConfigurationStatus `json:"status"`
}

// ActivationOp is how a built configuration is activated, as
// switch-to-configuration names it.
type ActivationOp string

// Activation operations.
const (
	OperationSwitch ActivationOp = "switch" // activate now and make it the boot default
	OperationBoot   ActivationOp = "boot"   // make it the boot default only
	OperationTest   ActivationOp = "test"   // activate now, do not touch the boot default
)

// Valid tells whether o is a known operation ("" means switch).
func (o ActivationOp) Valid() bool {
	return o == "" || o == OperationSwitch || o == OperationBoot || o == OperationTest
}

// NixosConfigurationSpec says which flake output the machine runs.
type NixosConfigurationSpec struct {
	// Generation increases with every change of the spec; the agent applies
	// each generation once.
	Generation int64 `json:"generation"`
	// Attempt asks the agent to try a generation that failed once more: a
	// failed generation is never retried until Attempt changes.
	Attempt int `json:"attempt,omitempty"`
	// GitRepo is the flake's repository URL.
	GitRepo string `json:"gitRepo"`
	// Ref is a branch or tag, used when Revision is empty.
	Ref string `json:"ref,omitempty"`
	// Revision is the exact commit to build.
	Revision string `json:"revision,omitempty"`
	// Flake is the attribute under nixosConfigurations, written "#attr"
	// (the machine's name when empty).
	Flake string `json:"flake,omitempty"`
	// ConfigurationSubdir is the flake's directory inside the repository.
	ConfigurationSubdir string `json:"configurationSubdir,omitempty"`
	// CredentialsRef names the secret with the repository's credentials
	// (keys "username" and "password", or "sshPrivateKey").
	CredentialsRef string `json:"credentialsRef,omitempty"`
	// AdditionalFiles are written into the checked-out flake before it is
	// built.
	AdditionalFiles []AdditionalFile `json:"additionalFiles,omitempty"`
	// HostFiles are written on the host itself, outside the flake (and so
	// outside the world-readable Nix store), before the generation is
	// activated: certificates, keys, tokens. Files an earlier generation
	// wrote that are no longer listed are removed.
	HostFiles []HostFile `json:"hostFiles,omitempty"`
	// OnRemoveFlake is the flake output the machine switches to when it is
	// released from the fleet.
	OnRemoveFlake string `json:"onRemoveFlake,omitempty"`
	// Operation is how the generation is activated (switch when empty).
	Operation ActivationOp `json:"operation,omitempty"`
}

// AdditionalFile is one file written into the checked-out flake.
type AdditionalFile struct {
	// Path is relative to the flake's directory and stays inside it.
	Path string `json:"path"`
	// Inline is the file's content; or
	Inline string `json:"inline,omitempty"`
	// SecretRef names a secret and the key in it whose value is the content.
	SecretRef *SecretKeyRef `json:"secretRef,omitempty"`
}

// HostFile is one file the agent writes on the host, atomically, before
// activation.
type HostFile struct {
	// Path is absolute, has no ".." element and lies under one of the
	// agent's allowed roots (by default /etc/kubernetes, /var/lib/nico,
	// /var/lib/rancher, /etc/rancher).
	Path string `json:"path"`
	// Inline is the file's content; or
	Inline string `json:"inline,omitempty"`
	// SecretRef names a secret and the key in it whose value is the content.
	SecretRef *SecretKeyRef `json:"secretRef,omitempty"`
	// Mode is the file's permission bits in octal ("0600" when empty).
	Mode string `json:"mode,omitempty"`
	// Owner is "user", "user:group" or numeric "uid:gid" (the agent's own
	// when empty).
	Owner string `json:"owner,omitempty"`
}

// SecretKeyRef is one value of a named secret.
type SecretKeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// Attr is the nixosConfigurations attribute the spec selects for machine.
func (s NixosConfigurationSpec) Attr(machine string) string {
	if len(s.Flake) > 1 && s.Flake[0] == '#' {
		return s.Flake[1:]
	}
	if s.Flake != "" && s.Flake != "#" {
		return s.Flake
	}
	return machine
}

// GenerationPhase is where a machine is with its desired generation.
//
//	(new generation) --> Applying --(built, switched, healthy)--> Applied
//	                        |
//	                        +--(fetch/build/activation/health failed; rolled back)--> Failed
//	Failed is final for that generation until spec.attempt changes.
type GenerationPhase string

// Generation phases.
const (
	GenerationPending  GenerationPhase = ""
	GenerationApplying GenerationPhase = "Applying"
	GenerationApplied  GenerationPhase = "Applied"
	GenerationFailed   GenerationPhase = "Failed"
)

// NixosConfigurationStatus is what the machine's agent reports.
type NixosConfigurationStatus struct {
	// Generation and Attempt are the last ones the agent worked on, Phase
	// its outcome.
	Generation int64           `json:"generation,omitempty"`
	Attempt    int             `json:"attempt,omitempty"`
	Phase      GenerationPhase `json:"phase,omitempty"`
	// AppliedGeneration is the newest generation the machine runs.
	AppliedGeneration int64 `json:"appliedGeneration,omitempty"`
	// Toplevel is the store path (or, for the exec applier, the identity)
	// of what the machine runs.
	Toplevel string `json:"toplevel,omitempty"`
	// RebootNeeded: the booted kernel differs from the current system's.
	RebootNeeded bool               `json:"rebootNeeded,omitempty"`
	LastError    string             `json:"lastError,omitempty"`
	UpdatedAt    time.Time          `json:"updatedAt,omitempty"`
	History      []GenerationRecord `json:"history,omitempty"`
}

// GenerationRecord is the outcome of one generation on the machine.
type GenerationRecord struct {
	Generation int64           `json:"generation"`
	Phase      GenerationPhase `json:"phase"`
	Toplevel   string          `json:"toplevel,omitempty"`
	Revision   string          `json:"revision,omitempty"`
	Message    string          `json:"message,omitempty"`
	Started    time.Time       `json:"started"`
	Finished   time.Time       `json:"finished"`
}

// MaxGenerationHistory bounds a configuration's history.
const MaxGenerationHistory = 10

// RecordGeneration appends an outcome, keeping the newest MaxGenerationHistory.
func (c *NixosConfiguration) RecordGeneration(r GenerationRecord) {
	c.Status.History = append(c.Status.History, r)
	if n := len(c.Status.History); n > MaxGenerationHistory {
		c.Status.History = c.Status.History[n-MaxGenerationHistory:]
	}
}

// Settled tells whether the agent has finished with the spec's generation
// and attempt, and how: Applied or Failed ("" while it has not).
func (c *NixosConfiguration) Settled() GenerationPhase {
	if c.Status.Generation != c.Spec.Generation || c.Status.Attempt != c.Spec.Attempt {
		return GenerationPending
	}
	if c.Status.Phase == GenerationApplied || c.Status.Phase == GenerationFailed {
		return c.Status.Phase
	}
	return GenerationPending
}

// NewNixosConfiguration returns a NixosConfiguration for machine.
func NewNixosConfiguration(machine string) *NixosConfiguration {
	return &NixosConfiguration{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindNixosConfiguration}, Metadata: ObjectMeta{Name: machine}}
}

// GetTypeMeta implements Object.
func (c *NixosConfiguration) GetTypeMeta() *TypeMeta { return &c.TypeMeta }

// GetMetadata implements Object.
func (c *NixosConfiguration) GetMetadata() *ObjectMeta { return &c.Metadata }
