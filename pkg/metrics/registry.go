package metrics

import (
	"regexp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Registry is a program's metrics: a prometheus.Registry with the Go and
// process collectors and, as the program adds them, nico's own.
type Registry struct {
	reg *prometheus.Registry
	all []prometheus.Collector
}

// NewRegistry returns a registry with the Go runtime and process metrics.
func NewRegistry() *Registry {
	r := &Registry{reg: prometheus.NewRegistry()}
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// MustRegister registers cs; a name registered twice panics (a programming
// error, caught by the package's tests).
func (r *Registry) MustRegister(cs ...prometheus.Collector) {
	r.reg.MustRegister(cs...)
	r.all = append(r.all, cs...)
}

// Gatherer is what the /metrics handler reads.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// fqName pulls the name out of a Desc's String (Desc has no accessor).
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Names lists the name of every metric the registry can export, whether or
// not it has a sample yet (a vector with no children exports none), sorted.
func (r *Registry) Names() []string {
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range r.all {
			c.Describe(ch)
		}
		close(ch)
	}()
	var names []string
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil && !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	return names
}
