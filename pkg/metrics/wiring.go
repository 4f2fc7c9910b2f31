package metrics

import (
	"log/slog"

	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/httpserve"
	"github.com/homystack/nico/pkg/pki"
)

// ServerFor makes the server of the metrics.* settings: on a loopback
// address plain HTTP; anywhere else TLS with metrics.tls.certFile/keyFile,
// requiring client certificates of metrics.tls.clientCAFile.
func ServerFor(m config.Metrics, reg *Registry, log *slog.Logger) (*Server, error) {
	s := &Server{Listen: m.Listen, Registry: reg, Log: log}
	if m.Listen != "" && !httpserve.Loopback(m.Listen) {
		t, err := pki.ServerTLS(m.ClientCAFile, m.CertFile, m.KeyFile, true)
		if err != nil {
			return nil, err
		}
		s.TLS = t
	}
	return s, nil
}

// meshSource adapts a gossip.Mesh to GossipSource.
type meshSource struct{ m *gossip.Mesh }

func (s meshSource) StateCounts() map[string]int {
	out := map[string]int{}
	for st, n := range s.m.StateCounts() {
		out[string(st)] = n
	}
	return out
}

func (s meshSource) ProbeFailures() uint64 { return s.m.ProbeFailures() }

// Mesh returns the GossipSource of m; nil when m is nil (no mesh).
func Mesh(m *gossip.Mesh) GossipSource {
	if m == nil {
		return nil
	}
	return meshSource{m}
}

// ForAgent is the registry nico-agent serves: the Go and process
// collectors, the agent's metrics for node, its controllers' health, its
// mesh (mesh may return nil) and the certificates in pkiDir.
func ForAgent(node string, health func() []controller.Health, mesh func() GossipSource, pkiDir string) (*Registry, *Agent) {
	reg := NewRegistry()
	a := NewAgent(reg, node)
	reg.MustRegister(ControllerHealth("agent", health), Gossip("agent", mesh), CertExpiry(pkiDir))
	return reg, a
}

// ForCoordinator is the registry nico-coordinator serves: the Go and
// process collectors, the coordinator's metrics, its leader controllers'
// health, its mesh (mesh may return nil) and the certificates in certDir.
func ForCoordinator(health func() []controller.Health, mesh func() GossipSource, certDir string) (*Registry, *Coordinator) {
	reg := NewRegistry()
	c := NewCoordinator(reg)
	reg.MustRegister(ControllerHealth("coordinator", health), Gossip("coordinator", mesh), CertExpiry(certDir))
	return reg, c
}
