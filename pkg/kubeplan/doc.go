// Package kubeplan is the pure planner of Kubernetes clusters: from a
// cluster's machine groups, the fleet's machines, and what was observed of
// the cluster's components and configurations, it decides which machines
// the cluster holds, its phase and conditions, and the next Rollout the
// cluster controller writes. It never reads the clock, etcd or a host.
//
// A cluster's life, as Judge reports it:
//
//	            (machines missing) WaitingForMachines
//	                  |     ^
//	                  v     |
//	create --> Provisioning ----(etcd -> API servers -> controller-manager,
//	              |   ^          scheduler -> data plane, all ready)----> Ready
//	              |   +---------------(a component not ready)--------------+
//	              +--(a named machine does not exist, a rollout halted)--> Failed
//	any phase --(deletion asked)--> Deleting --(machines released, secrets gone)--> (deleted)
//
// Components come up in dependency order (Conditions): etcd, then the API
// servers, then controller-manager and scheduler, then the data plane. No
// data-plane machine is rolled before the API servers are ready (Next).
package kubeplan
