package config

// Objects is the manifest of the fleet's objects the flake declares
// (services.nico.objects, docs/declared-objects.md): `nico-agent
// apply-objects` applies it (nico-objects.service runs it once the agent
// is ready, when the agent starts again and after a switch that changes it).
type Objects struct {
	File string // "objects.file": the manifest; empty: none
}

// objectKeys are the agent's declared-objects keys.
func objectKeys(o *Objects) []key {
	return []key{
		stringKey("objects.file", &o.File, "",
			"the manifest of the fleet's objects the flake declares (a FlakeObjects header, then EtcdCluster, MachinePool and KubernetesCluster documents), applied on a control-plane host by nico-agent apply-objects; empty: none", absPath(true)),
	}
}
