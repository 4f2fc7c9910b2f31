// Package metrics holds every Prometheus metric nico exports, in one place:
// their names (nico_ prefix, base units, _total counters), the registry
// each program serves, the collectors that read state that already exists
// (controller health, gossip counts, certificate files) on each scrape, the
// hooks the coordinator and the agent call where things happen, and the
// /metrics (and pprof) server with its loopback-or-mutual-TLS rule.
//
// Every hook method is safe on a nil receiver, so the programs' tests and
// embeddings that do not serve metrics pass nil.
package metrics
