// Package meshscale measures the gossip mesh at fleet size: N members of
// pkg/gossip, split over several processes on loopback, from the first
// start until every member sees every other alive, and from the crash of
// one member until every other member sees it suspect and dead.
//
// The benchmark (BenchmarkMeshScale) is the parent; it runs the test
// binary again as its children, each holding N/k members:
//
//	parent                          child 0              child 1..k-1
//	  | start child 0 ------------->  seeds m0..m2
//	  | <-------------------- {"type":"seeds"}
//	  | start the others (seeds in env) -------------------> members join
//	  | <------- {"type":"view"} every 250 ms from every child
//	  |   converged: every member of every child sees N alive
//	  | "watch NAME" to all, "crash NAME" to its child
//	  | <------- {"type":"crashed"}, then {"type":"view"} with the
//	  |   victim's suspect and dead counts, until every other member
//	  |   sees it dead
//	  | SIGKILL every child
//
// Children read commands on stdin and exit when it closes; they write one
// JSON report a line on stdout (protocol_test.go).
package meshscale
