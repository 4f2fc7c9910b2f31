// Package hypervisor is a hypervisor host's domain controller: it runs the
// libvirt domains of the machines placed on the host (through the
// interface of pkg/hypervisor), reports the host's capacity and each
// machine's domain state, and hands a new machine its first-boot identity.
// The node agent (package agent) runs it in its node group on a host with
// the hypervisor role (Setup, agent.Config.Hypervisor).
//
//	controller.go  Controller, Config, New: one pass (Once) and its wiring on the runtime
//	plan.go        planDomains: the pure diff of machines and domains
//	boot.go        signs of boot per domain, the domain type (auto: kvm, then qemu)
//	retry.go       the per-machine backoff of failing domain actions
//	status.go      the machines' observed status
//	setup.go       Setup: what the agent is given to run it
//
// It imports pkg/hypervisor under the same name: in this package,
// hypervisor.X is always that package's.
package hypervisor
