package agent

import (
	"context"
	"testing"
	"time"

	"github.com/homystack/nico/agent/joinendpoint"
)

// serveJoinEndpoint runs je until ctx ends and waits until it serves; the
// returned channel gets what Run returned.
func serveJoinEndpoint(t *testing.T, ctx context.Context, je *joinendpoint.Endpoint) <-chan error {
	t.Helper()
	je.Ready = make(chan struct{})
	served := make(chan error, 1)
	go func() { served <- je.Run(ctx) }()
	select {
	case <-je.Ready:
	case err := <-served:
		t.Fatalf("join endpoint: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("join endpoint not serving within 60s")
	}
	return served
}
