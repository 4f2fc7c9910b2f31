package agent

import (
	"testing"

	"github.com/homystack/nico/tests/narrowdeps"
)

// TestNoComponentHoldsTheAgent: the agent's components and controllers
// take the dependencies they use (the configuration, the store, a clock, a
// logger, another component), never *Agent. Only the bring-up may hold
// it: it is the composition's own first sequence (it starts the groups
// Run composes, agent/bringup.go).
func TestNoComponentHoldsTheAgent(t *testing.T) {
	t.Parallel()
	holders, structs, err := narrowdeps.Holders(".", "Agent", map[string]bool{"bringUp": true})
	if err != nil {
		t.Fatal(err)
	}
	if structs < 10 {
		t.Fatalf("read %d structs of the package; want its components", structs)
	}
	for _, h := range holders {
		t.Errorf("%s has a field of type *Agent; give it the dependencies it uses", h)
	}
}
