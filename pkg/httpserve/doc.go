// Package httpserve opens and serves the HTTP endpoints nico's programs
// offer besides etcd (the agent's and the coordinator's /metrics, the
// coordinator's status page) under one rule: on a loopback address plain
// HTTP is enough; on any other address the endpoint serves only TLS that
// requires a client certificate of the cluster CA.
package httpserve
