package coordinator

import (
	"context"
	"testing"
)

// runInBackground runs c until the stop it returns is called: stop
// cancels Run, waits for it to return and reports its error. A test
// defers it, so that c stops before what the test deferred earlier:
//
//	defer runInBackground(t, c)()
func runInBackground(t *testing.T, c *Coordinator) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}
