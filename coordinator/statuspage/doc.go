// Package statuspage serves the coordinator's read-only status page: the
// etcd members with role, health, raft index and learner progress, the
// nodes with liveness and generation, the operation in flight, rollouts
// with their current node, ETA and timeline, machine pools and
// Kubernetes clusters.
//
// Every candidate renders the page itself from the store (and etcd's
// member list), leader or not: each can read both, so nothing is
// forwarded. The page is server-rendered HTML (html/template, embedded);
// a small inline script keeps it live through server-sent events. One
// etcd watch on the store prefix drives them: a burst of changes is
// coalesced (Hub.Debounce) into one render, sent to every open page.
//
//	store write -> watch event -> debounce -> Read -> render fragment -> SSE "update" -> innerHTML
//
// On loopback the page is plain HTTP; anywhere else it is TLS that
// requires a client certificate of the cluster CA whose Common Name is
// one of ReaderIdentities (docs/statuspage.md).
package statuspage
