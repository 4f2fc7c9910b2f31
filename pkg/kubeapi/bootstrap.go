package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"time"
)

// ObjectMeta is the part of an object's metadata nico writes.
type ObjectMeta struct {
	Name            string            `json:"name"`
	Namespace       string            `json:"namespace,omitempty"`
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
}

// Secret is a core/v1 Secret.
type Secret struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   ObjectMeta        `json:"metadata"`
	Type       string            `json:"type,omitempty"`
	Data       map[string][]byte `json:"data,omitempty"`
}

// ClusterRoleBinding is an rbac/v1 ClusterRoleBinding.
type ClusterRoleBinding struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   ObjectMeta `json:"metadata"`
	RoleRef    RoleRef    `json:"roleRef"`
	Subjects   []Subject  `json:"subjects"`
}

// RoleRef names a ClusterRole.
type RoleRef struct {
	APIGroup string `json:"apiGroup"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
}

// Subject is a binding's subject.
type Subject struct {
	APIGroup string `json:"apiGroup,omitempty"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
}

// Bootstrap-token Secret's type and fields (the API server's bootstrap
// token authenticator and the bootstrap signer read them).
const (
	BootstrapTokenType      = "bootstrap.kubernetes.io/token"
	BootstrapTokenNamespace = "kube-system"
	// ManagedByLabel marks what nico writes in a cluster.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "nico"
)

// The ClusterRoleBindings EnsureBootstrap writes, and the ClusterRoles
// (Kubernetes' own) they bind: a bootstrap token's group may file node
// client CSRs and have them approved; nodes may have their renewed client
// certificates approved (kubeadm's three bindings); and nodes may read
// what kube-proxy reads, so that a machine's kube-proxy runs with its
// kubelet's certificate (a data-plane machine holds no other credential).
const (
	BindingNodeBootstrapper = "nico:kubelet-bootstrap"
	BindingNodeClient       = "nico:node-autoapprove-bootstrap"
	BindingSelfNodeClient   = "nico:node-autoapprove-certificate-rotation"
	BindingNodeProxier      = "nico:node-proxier"
	RoleNodeBootstrapper    = "system:node-bootstrapper"
	RoleNodeClient          = "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
	RoleSelfNodeClient      = "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"
	RoleNodeProxier         = "system:node-proxier"
	NodesGroup              = "system:nodes"
)

// Bootstrap is a cluster's bootstrap token as it is registered.
type Bootstrap struct {
	// TokenID and TokenSecret are the token's two parts (<id>.<secret>).
	TokenID, TokenSecret string
	// Expires is when the API server stops accepting it (and the token
	// cleaner deletes it).
	Expires time.Time
	// Group is the extra group it authenticates as (system:bootstrappers:...).
	Group string
	// Description says who made it.
	Description string
}

// SecretName is the token's Secret in kube-system.
func (b Bootstrap) SecretName() string { return "bootstrap-token-" + b.TokenID }

// Objects are the bootstrap token's Secret and the bindings, as
// EnsureBootstrap writes them.
func (b Bootstrap) Objects() (Secret, []ClusterRoleBinding) {
	labels := map[string]string{ManagedByLabel: ManagedBy}
	sec := Secret{APIVersion: "v1", Kind: "Secret", Type: BootstrapTokenType,
		Metadata: ObjectMeta{Name: b.SecretName(), Namespace: BootstrapTokenNamespace, Labels: labels},
		Data: map[string][]byte{
			"token-id":                       []byte(b.TokenID),
			"token-secret":                   []byte(b.TokenSecret),
			"expiration":                     []byte(b.Expires.UTC().Format(time.RFC3339)),
			"usage-bootstrap-authentication": []byte("true"),
			"usage-bootstrap-signing":        []byte("true"),
			"auth-extra-groups":              []byte(b.Group),
			"description":                    []byte(b.Description),
		}}
	bind := func(name, role, group string) ClusterRoleBinding {
		return ClusterRoleBinding{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding",
			Metadata: ObjectMeta{Name: name, Labels: labels},
			RoleRef:  RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects: []Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: group}}}
	}
	return sec, []ClusterRoleBinding{
		bind(BindingNodeBootstrapper, RoleNodeBootstrapper, b.Group),
		bind(BindingNodeClient, RoleNodeClient, b.Group),
		bind(BindingSelfNodeClient, RoleSelfNodeClient, NodesGroup),
		bind(BindingNodeProxier, RoleNodeProxier, NodesGroup),
	}
}

// EnsureBootstrap registers b: its Secret and the bindings, each created
// when absent and replaced when it differs; what is in place is left
// alone (idempotent). check runs before every write (the caller's fence:
// a deposed leader stops there) and its error is returned. It returns the
// objects it wrote. Earlier tokens are not touched: each stays valid
// until its own expiry.
func (c *Client) EnsureBootstrap(ctx context.Context, b Bootstrap, check func(context.Context) error) ([]string, error) {
	sec, binds := b.Objects()
	var wrote []string
	secrets := "/api/v1/namespaces/" + BootstrapTokenNamespace + "/secrets"
	ok, err := ensure(ctx, c, secrets, &sec, func(s *Secret) *ObjectMeta { return &s.Metadata },
		func(cur, want *Secret) bool {
			return cur.Type == want.Type && maps.EqualFunc(cur.Data, want.Data, bytesEqual)
		}, check)
	if err != nil {
		return wrote, err
	}
	if ok {
		wrote = append(wrote, "secret "+sec.Metadata.Name)
	}
	for i := range binds {
		ok, err := ensure(ctx, c, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", &binds[i],
			func(r *ClusterRoleBinding) *ObjectMeta { return &r.Metadata },
			func(cur, want *ClusterRoleBinding) bool {
				return cur.RoleRef == want.RoleRef && reflect.DeepEqual(cur.Subjects, want.Subjects)
			}, check)
		if err != nil {
			return wrote, err
		}
		if ok {
			wrote = append(wrote, "clusterrolebinding "+binds[i].Metadata.Name)
		}
	}
	return wrote, nil
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

// ensure makes the object want exist in collection as same judges it,
// and tells whether it wrote.
func ensure[T any](ctx context.Context, c *Client, collection string, want *T, meta func(*T) *ObjectMeta, same func(cur, want *T) bool, check func(context.Context) error) (bool, error) {
	name := meta(want).Name
	var cur T
	err := c.Get(ctx, collection+"/"+name, &cur)
	switch {
	case errors.Is(err, ErrNotFound):
		if err := check(ctx); err != nil {
			return false, err
		}
		if err := c.Create(ctx, collection, want); err != nil {
			if errors.Is(err, ErrExists) {
				return false, nil // made meanwhile; the next pass judges it
			}
			return false, fmt.Errorf("create %s: %w", name, err)
		}
		return true, nil
	case err != nil:
		return false, fmt.Errorf("read %s: %w", name, err)
	case same(&cur, want):
		return false, nil
	}
	if err := check(ctx); err != nil {
		return false, err
	}
	next := *want
	meta(&next).ResourceVersion = meta(&cur).ResourceVersion
	if err := c.Update(ctx, collection+"/"+name, &next); err != nil {
		return false, fmt.Errorf("update %s: %w", name, err)
	}
	return true, nil
}
