// Package fleetkit is the one fleet harness of tests/integration and
// tests/bench (test packages cannot import each other): in-process agents
// on real etcd members (embedded, or the etcd binaries) and coordinator
// candidates, on fresh loopback ports, each agent given what its join
// would have given it (Provision); waits on the member list and on store
// objects; and a stop that ends every candidate and agent and waits for
// their members before the fleet's directories go.
package fleetkit
