package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// codeDefaults are the defaults pkg/api's own defaulting functions give a
// field left out, by kind and path; they fill the Default column where
// the field's doc comment has no Default: line.
func codeDefaults() (map[string]map[string]string, error) {
	var kc api.KubernetesClusterSpec
	cluster := map[string]string{
		"spec.etcd.provider": string(kc.Etcd.ProviderOrDefault()),
		// The drain hook's timeout becomes its DrainRequest's.
		"spec.drain.timeout": duration(api.DrainRequestSpec{}.TimeoutOrDefault()),
	}
	if err := flatten("spec.probes", kc.Probes.WithDefaults(), cluster); err != nil {
		return nil, err
	}
	var ec api.EtcdClusterSpec
	return map[string]map[string]string{
		api.KindKubernetesCluster: cluster,
		api.KindEtcdCluster: {
			"spec.snapshots.timeout": duration(ec.Snapshots.TimeoutOrDefault()),
		},
		api.KindMachinePool: {
			"spec.template.storagePool": api.MachineTemplate{}.StoragePoolName(),
		},
		api.KindMachine: {
			"spec.template.storagePool": api.MachineTemplate{}.StoragePoolName(),
		},
		api.KindDrainRequest: {
			"spec.timeout": duration(api.DrainRequestSpec{}.TimeoutOrDefault()),
		},
	}, nil
}

// duration is d as a doc would write it: 10m, not 10m0s.
func duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// flatten records v's JSON leaves under prefix: path -> value.
func flatten(prefix string, v any, out map[string]string) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	walk(prefix, doc, out)
	return nil
}

func walk(path string, v any, out map[string]string) {
	m, ok := v.(map[string]any)
	if !ok {
		out[path] = leaf(v)
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		walk(path+"."+k, m[k], out)
	}
}

func leaf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
