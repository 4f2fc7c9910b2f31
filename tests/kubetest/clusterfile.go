package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"

	"github.com/homystack/nico/pkg/clusternix"
)

// ClusterFile is what a flake reads from cluster.nix (schema version
// clusternix.SchemaVersion), as nix-instantiate evaluates it to JSON.
type ClusterFile struct {
	SchemaVersion        int    `json:"schemaVersion"`
	Name                 string `json:"name"`
	Version              string `json:"version"`
	ControlPlaneEndpoint struct {
		Host string `json:"host"`
		Port int    `json:"port"`
	} `json:"controlPlaneEndpoint"`
	Nodes struct {
		ControlPlane []ClusterNode `json:"controlPlane"`
		DataPlane    []ClusterNode `json:"dataPlane"`
	} `json:"nodes"`
	Etcd struct {
		Provider  string   `json:"provider"`
		Endpoints []string `json:"endpoints"`
		Prefix    string   `json:"prefix"`
	} `json:"etcd"`
	// Components are how the flake runs each component, by cluster.nix's
	// name (apiServer, controllerManager, scheduler, kubelet).
	Components map[string]ClusterComponent `json:"components"`
	Paths      map[string]string           `json:"paths"`
}

// ClusterComponent is one component of cluster.nix.
type ClusterComponent struct {
	Provider  string            `json:"provider"`
	Version   string            `json:"version"`
	ExtraArgs map[string]string `json:"extraArgs"`
	Limits    map[string]string `json:"limits"`
}

// Args are component name's extraArgs as flags, sorted by flag name, as the
// schema's componentArgs gives them.
func (c *ClusterFile) Args(name string) []string {
	args := c.Components[name].ExtraArgs
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]string, 0, len(args))
	for _, k := range names {
		out = append(out, "--"+k+"="+args[k])
	}
	return out
}

// ClusterNode is one machine of cluster.nix.
type ClusterNode struct {
	Name      string   `json:"name"`
	Addresses []string `json:"addresses"`
}

// Role is "controlPlane", "dataPlane" or "" for a machine not listed.
func (c *ClusterFile) Role(machine string) string {
	for _, n := range c.Nodes.ControlPlane {
		if n.Name == machine {
			return "controlPlane"
		}
	}
	for _, n := range c.Nodes.DataPlane {
		if n.Name == machine {
			return "dataPlane"
		}
	}
	return ""
}

// Node returns the machine's entry.
func (c *ClusterFile) Node(machine string) (ClusterNode, bool) {
	for _, n := range append(append([]ClusterNode{}, c.Nodes.ControlPlane...), c.Nodes.DataPlane...) {
		if n.Name == machine {
			return n, true
		}
	}
	return ClusterNode{}, false
}

// EvalClusterFile evaluates the cluster.nix at path with nix-instantiate,
// as a flake importing it would, and decodes it.
func EvalClusterFile(ctx context.Context, path string) (*ClusterFile, error) {
	cmd := exec.CommandContext(ctx, "nix-instantiate", "--eval", "--strict", "--json", "--readonly-mode", "-E", "import "+path)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kubetest: evaluate %s: %w: %s", path, err, bytes.TrimSpace(errb.Bytes()))
	}
	c := &ClusterFile{}
	if err := json.Unmarshal(out.Bytes(), c); err != nil {
		return nil, fmt.Errorf("kubetest: %s: %w", path, err)
	}
	if c.SchemaVersion != clusternix.SchemaVersion {
		return nil, fmt.Errorf("kubetest: %s: schemaVersion %d, want %d", path, c.SchemaVersion, clusternix.SchemaVersion)
	}
	return c, nil
}
