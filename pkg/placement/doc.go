// Package placement is the pure planner of machine pools: from the pools,
// the machines, the hypervisor hosts' reports and the nodes, it decides
// which machines to create, where to place them, which to resize, and how to
// take surplus machines away. It never reads the clock, etcd or a host.
// Beside a pool's own count it serves the declared clusters' MachineClaims
// (claims.go): their machines spread over failure domains, the Spread
// condition when losing one domain would lose quorum.
//
// A surplus machine (its ordinal is at or past the pool's count) is taken
// away only after its node has left the cluster through the safe removal:
//
//	surplus --node registered--> RequestRemoval --> removal Pending/Running (wait)
//	   |                                                 |
//	   |                                 Done -----------+---- Refused/Failed --> condition, kept
//	   |                                  v
//	   +--no node / node Removed--> Deleting (host shuts down, undefines) --> Deleted --> object deleted
//	   +--never placed------------> object deleted
package placement
