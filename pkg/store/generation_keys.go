package store

// Keys of generations and rollouts.
const (
	NixosConfigsDir = "nixosconfigs/"
	RolloutsDir     = "rollouts/"
	// SecretsDir holds secrets that configurations reference by name.
	SecretsDir = "secrets/"
)

// NixosConfigKey is where machine's desired NixOS configuration lives.
func NixosConfigKey(machine string) string { return NixosConfigsDir + machine }

// RolloutKey is where rollout name lives.
func RolloutKey(name string) string { return RolloutsDir + name }
