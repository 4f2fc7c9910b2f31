package metrics

import "github.com/prometheus/client_golang/prometheus"

// Generation outcomes of nico_agent_generations_total.
const (
	GenerationApplied    = "applied"
	GenerationRolledBack = "rolled_back"
	GenerationFailed     = "failed"
)

// Agent holds the metrics of one node's agent.
type Agent struct {
	generations *prometheus.CounterVec
	joins       *prometheus.CounterVec
}

// NewAgent makes the agent's metrics and registers them in r; node is the
// machine's name, a label of the generation counter so that alerts name
// the node without relabelling.
func NewAgent(r *Registry, node string) *Agent {
	a := &Agent{
		generations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nico_agent_generations_total", Help: "Generations this node's agent applied, rolled back after a failed health check, or failed to apply, by outcome.",
			ConstLabels: prometheus.Labels{"node": node},
		}, []string{"outcome"}),
		joins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nico_join_endpoint_requests_total", Help: "Requests to this node's join endpoint, by path, outcome (answered, refused) and refusal reason (never the token).",
		}, []string{"path", "outcome", "reason"}),
	}
	for _, o := range []string{GenerationApplied, GenerationRolledBack, GenerationFailed} {
		a.generations.WithLabelValues(o) // exported at 0, so that increase() sees the first one
	}
	r.MustRegister(a.generations, a.joins)
	return a
}

// Generation counts one generation's outcome.
func (a *Agent) Generation(outcome string) {
	if a == nil {
		return
	}
	a.generations.WithLabelValues(outcome).Inc()
}

// JoinRequest counts one join endpoint request to path: reason is "" when
// it was answered, else the refusal's code (join.ServerConfig.OnRequest).
func (a *Agent) JoinRequest(path, reason string) {
	if a == nil {
		return
	}
	if reason == "" {
		a.joins.WithLabelValues(path, "answered", "").Inc()
		return
	}
	a.joins.WithLabelValues(path, "refused", reason).Inc()
}
