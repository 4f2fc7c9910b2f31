package hypervisor

import "github.com/homystack/nico/pkg/hypervisor"

// Setup runs a hypervisor host's domain controller inside the
// agent, once the node is registered, on the agent's store client.
type Setup struct {
	HV hypervisor.Hypervisor
	// Config tunes the controller; Node, Prefix and Endpoints default to the
	// agent's (Endpoints to the ones the agent reached the cluster with).
	Config Config
}
