package api

// KindSecret is the kind of a named secret (Secret).
const KindSecret = "Secret"

// Secret is a named set of secret values, such as a Kubernetes cluster's
// certificates under Cluster API's names (<cluster>-ca with tls.crt and
// tls.key, <cluster>-kubeconfig with value). It is kept sealed with the
// store's secrets key (package secrets) under store.NamedSecretKey, which
// only root identities read; a machine reads the values it needs from its
// own NodeSecrets.
type Secret struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta `json:"metadata"`
	Spec     SecretSpec `json:"spec"`
}

// SecretSpec is a secret's values and who owns it.
type SecretSpec struct {
	// Cluster is the KubernetesCluster the secret belongs to ("" for none):
	// deleting the cluster deletes its secrets, and a secret of another
	// cluster is never taken over.
	Cluster string `json:"cluster,omitempty"`
	// Type says what the secret holds, as Cluster API writes it
	// ("cluster.x-k8s.io/secret"), or "" for opaque.
	Type string `json:"type,omitempty"`
	// Data is the values by key (base64 in JSON).
	Data map[string][]byte `json:"data"`
}

// NewSecret returns secret name with its type filled in.
func NewSecret(name string) *Secret {
	return &Secret{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindSecret}, Metadata: ObjectMeta{Name: name}}
}

// GetTypeMeta implements Object.
func (s *Secret) GetTypeMeta() *TypeMeta { return &s.TypeMeta }

// GetMetadata implements Object.
func (s *Secret) GetMetadata() *ObjectMeta { return &s.Metadata }

// KindNodeSecrets is the kind of NodeSecrets.
const KindNodeSecrets = "NodeSecrets"

// NodeSecrets are the values of named secrets one machine may read (only
// the keys its host files name: a data-plane machine gets a CA's tls.crt,
// never its tls.key), sealed to that machine's node certificate key and
// kept under its own secrets dir (store.NodeNamedSecretsKey), which only
// it and root read. Its agent resolves secretRefs from it.
type NodeSecrets struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta      `json:"metadata"`
	Spec     NodeSecretsSpec `json:"spec"`
}

// NodeSecretsSpec is the sealed values and the generation they are bound to.
type NodeSecretsSpec struct {
	// Generation increases with every change; it is bound into the seal.
	Generation uint64 `json:"generation"`
	// Digest identifies the plaintext (a keyed hash), so a writer can tell
	// whether the values changed without opening them.
	Digest string `json:"digest"`
	// Sealed is the JSON of map[secret]map[key]value sealed to the node's
	// certificate key (base64 in JSON).
	Sealed []byte `json:"sealed"`
}

// NewNodeSecrets returns machine's NodeSecrets with its type filled in.
func NewNodeSecrets(machine string) *NodeSecrets {
	return &NodeSecrets{TypeMeta: TypeMeta{APIVersion: Version, Kind: KindNodeSecrets}, Metadata: ObjectMeta{Name: machine}}
}

// GetTypeMeta implements Object.
func (s *NodeSecrets) GetTypeMeta() *TypeMeta { return &s.TypeMeta }

// GetMetadata implements Object.
func (s *NodeSecrets) GetMetadata() *ObjectMeta { return &s.Metadata }
