package agent

import (
	"bytes"
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"
)

// rewriteKubeconfigServer returns the kubeconfig data with the server of
// every cluster entry set to server (a distribution writes its own
// address, often https://127.0.0.1:6443). Data that is not a kubeconfig
// (no clusters[].cluster.server) is refused saying what is missing.
func rewriteKubeconfigServer(data []byte, server string) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	if doc == nil {
		return nil, errors.New("empty: want a kubeconfig with clusters[].cluster.server")
	}
	if k, _ := doc["kind"].(string); k != "" && k != "Config" {
		return nil, fmt.Errorf("kind %q: want Config", k)
	}
	clusters, ok := doc["clusters"].([]any)
	if !ok || len(clusters) == 0 {
		return nil, errors.New("no clusters: want a kubeconfig with clusters[].cluster.server")
	}
	for i, c := range clusters {
		entry, _ := c.(map[string]any)
		cl, _ := entry["cluster"].(map[string]any)
		if cl == nil {
			return nil, fmt.Errorf("clusters[%d] has no cluster", i)
		}
		if s, _ := cl["server"].(string); s == "" {
			return nil, fmt.Errorf("clusters[%d].cluster has no server", i)
		}
		cl["server"] = server
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return out.Bytes(), nil
}
