package config

// Objects is the manifest of the fleet's objects the flake declares
// (services.nico.objects, docs/declared-objects.md): a control-plane agent
// applies it when it starts, and `nico-agent apply-objects` after each
// switch (the unit's reload).
type Objects struct {
	File string // "objects.file": the manifest; empty: none
}

// objectKeys are the agent's declared-objects keys.
func objectKeys(o *Objects) []key {
	return []key{
		stringKey("objects.file", &o.File, "",
			"the manifest of the fleet's objects the flake declares (a FlakeObjects header, then EtcdCluster, MachinePool and KubernetesCluster documents), applied by a control-plane agent when it starts and by nico-agent apply-objects; empty: none", absPath(true)),
	}
}
