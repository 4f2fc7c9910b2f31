package kubeplan

import (
	"slices"
	"strings"

	"github.com/homystack/nico/pkg/api"
)

// OnRemoveFlake is the flake output a machine switches to when the
// cluster releases it.
const OnRemoveFlake = "#minimal"

// ClusterNixPath is where cluster.nix lands in the checked-out flake.
const ClusterNixPath = "cluster.nix"

// SpecInput is what a machine's configuration is made of.
type SpecInput struct {
	Cluster *api.KubernetesCluster
	// DefaultGitRepo is the coordinator's repository, for a cluster that
	// names none.
	DefaultGitRepo string
	// ClusterNix is cluster.nix's content ("": none delivered).
	ClusterNix string
	// HostFiles are the machine's certificates, keys and tokens, written
	// on the host outside the Nix store (secrets by reference).
	HostFiles []api.HostFile
}

// MachineSpec is the configuration machine runs in the cluster: the
// cluster's repository and directory, the flake output "#<machine>",
// OnRemoveFlake, cluster.nix inline in the flake and the host files,
// sorted by path.
func MachineSpec(in SpecInput, machine string) api.NixosConfigurationSpec {
	s := baseSpec(in.Cluster, in.DefaultGitRepo)
	s.Flake = "#" + machine
	if in.ClusterNix != "" {
		s.AdditionalFiles = append(s.AdditionalFiles, api.AdditionalFile{Path: ClusterNixPath, Inline: in.ClusterNix})
	}
	s.HostFiles = slices.Clone(in.HostFiles)
	slices.SortStableFunc(s.HostFiles, func(a, b api.HostFile) int { return strings.Compare(a.Path, b.Path) })
	return s
}

// ReleaseSpec is what a released machine runs: the same repository's
// OnRemoveFlake, with none of the cluster's files.
func ReleaseSpec(c *api.KubernetesCluster, defaultGitRepo string) api.NixosConfigurationSpec {
	s := baseSpec(c, defaultGitRepo)
	s.Flake = OnRemoveFlake
	return s
}

func baseSpec(c *api.KubernetesCluster, defaultGitRepo string) api.NixosConfigurationSpec {
	repo := c.Spec.GitRepo
	if repo == "" {
		repo = defaultGitRepo
	}
	return api.NixosConfigurationSpec{
		GitRepo: repo, ConfigurationSubdir: c.Spec.ConfigurationSubdir, CredentialsRef: c.Spec.CredentialsRef,
		OnRemoveFlake: OnRemoveFlake,
	}
}

// Owner is the owner reference of what is made for cluster c.
func Owner(c *api.KubernetesCluster) api.OwnerReference {
	return api.OwnerReference{APIVersion: api.ClusterAPIVersion, Kind: api.KindKubernetesCluster, Name: c.Metadata.Name}
}

// OwnedBy tells whether refs name cluster as an owner.
func OwnedBy(refs []api.OwnerReference, cluster string) bool {
	return slices.ContainsFunc(refs, func(r api.OwnerReference) bool {
		return r.Kind == api.KindKubernetesCluster && r.Name == cluster
	})
}
