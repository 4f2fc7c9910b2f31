package coordinator

import (
	"testing"

	"github.com/homystack/nico/tests/narrowdeps"
)

// TestNoControllerHoldsTheCoordinator: controllers take the narrow
// dependencies they use (a store view, the member admin, a clock, a
// logger), never *Coordinator: no struct of the package but Coordinator
// itself has a field of that type.
func TestNoControllerHoldsTheCoordinator(t *testing.T) {
	t.Parallel()
	holders, structs, err := narrowdeps.Holders(".", "Coordinator", nil)
	if err != nil {
		t.Fatal(err)
	}
	if structs == 0 {
		t.Fatal("no struct of the package read")
	}
	for _, h := range holders {
		t.Errorf("%s has a field of type *Coordinator; give it the dependencies it uses", h)
	}
}
