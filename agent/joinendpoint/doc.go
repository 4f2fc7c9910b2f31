// Package joinendpoint is the join endpoint a control-plane machine serves,
// and the client side a machine uses to join and renew through one.
//
// The endpoint (Endpoint) runs with the coordinator's identity: it reads
// the join tokens (pkg/token, sealed with pkg/secrets), makes a joining
// node's etcd user and role (pkg/rbac) and hands it the cluster's current
// gossip secret (pkg/gossipkey). Nothing of that is the node lifecycle's
// (package agent): the agent's main runs the endpoint next to the agent,
// and gives the agent Obtain and Renew as its ObtainCerts and
// RenewNodeCert.
//
//	endpoint.go       Endpoint: one serve: dial etcd as nico-coordinator, serve HTTPS
//	serving.go        the join-endpoint controller that keeps it serving (keys in place, CA changes)
//	token_prune.go    the controller that deletes long-expired tokens
//	gossip_secret.go  GossipSecret: what a machine's gossip keys derive from
//	client.go         Obtain (join with a token), Renew (POST /v1/renew)
package joinendpoint
