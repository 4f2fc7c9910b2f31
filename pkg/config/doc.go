// Package config loads the configuration of nico's programs from one place:
// defaults, a YAML file, NICO_* environment variables and command-line flags,
// and validates it.
//
// Each program has one table of keys (agent.go, coordinator.go, ctl.go).
// Every key, say "etcd.peerURL", is at once
//
//	a flag             --etcd.peerURL=https://10.0.0.1:2380
//	an env variable    NICO_ETCD_PEERURL=https://10.0.0.1:2380
//	a YAML path        etcd: {peerURL: https://10.0.0.1:2380}
//
// and a value set by a flag wins over the environment, which wins over the
// file, which wins over the default. The file is named by --config or
// NICO_CONFIG; there is none by default. Keys are matched without regard to
// case, as viper does. Lists are YAML sequences in the file and
// comma-separated in flags and the environment.
//
// Loading reports every problem at once (errors.Join): an unknown key in the
// file, a value of the wrong type or out of range, a combination of keys that
// cannot work. Each error is a *KeyError naming the key, the bad value and
// what would be accepted.
package config
