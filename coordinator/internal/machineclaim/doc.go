// Package machineclaim is the pure planner of a declared cluster's
// MachineClaim: from how many machines the cluster wants in a role (the
// EtcdCluster's voters, a Kubernetes plane's count), the registered
// machines that already fill it and the state of each machine the claim
// asked for, it decides which machines the claim lists. It never reads
// the clock, etcd or a host; the claimant's controller writes its plan and
// the machine-pool planner (package placement) creates, places and takes
// away the machines.
//
// A claimed machine's life, as this planner sees it:
//
//	listed --registers--> standby or member --member shed (etcd leader last)--> standby
//	   |                        |                                                  |
//	   |                        +--dead past replaceDeadAfter: the member is        |
//	   |                        |  removed first (membership), then it left -------+
//	   |                        v                                                  v
//	   +--dead or failed past replaceDeadAfter, not a member--> released <--surplus, not a member
//	                                                               |
//	              (placement: the node's removal, then the domain and its disk deleted)
//
// A released machine is never listed again: names are never reused. The
// claim is short by one after a release and a fresh name is listed in the
// same pass, so a dead VM is replaced by a new one. A member is never
// released: it gives up its role first (the membership planner sheds a
// claimed VM voter before a host that came on its own, the leader last),
// then it is released as a surplus standby.
package machineclaim
