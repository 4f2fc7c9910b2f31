package apply_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/homystack/nico/pkg/apply"
)

// TestGateDeadlineKeepsTheCause: a round of checks that the deadline cuts
// short fails with the context's error; the gate reports the cause the
// last whole round found, not "context deadline exceeded" (seen with the
// failed-units check under a real systemd, tests/systemd).
func TestGateDeadlineKeepsTheCause(t *testing.T) {
	var rounds atomic.Int32
	check := CheckFunc{Label: "app", F: func(ctx context.Context) error {
		if rounds.Add(1) == 1 {
			return errors.New("failed: app.service")
		}
		<-ctx.Done() // a check still running at the deadline
		return ctx.Err()
	}}
	g := Gate{Deadline: 200 * time.Millisecond, Interval: 10 * time.Millisecond}
	err := g.Wait(t.Context(), check)
	if !errors.Is(err, ErrHealth) || !strings.Contains(err.Error(), "failed: app.service") {
		t.Fatalf("err = %v, want %v with the cause failed: app.service", err, ErrHealth)
	}
	if strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("err = %v: the deadline hid the cause", err)
	}
}

// TestGateCancelled: a cancelled apply ends the gate with the context's
// error, not a health failure.
func TestGateCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	check := CheckFunc{Label: "app", F: func(context.Context) error { cancel(); return errors.New("failed: app.service") }}
	err := Gate{Deadline: time.Minute, Interval: 10 * time.Millisecond}.Wait(ctx, check)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrHealth) {
		t.Fatalf("err = %v, want %v", err, context.Canceled)
	}
}
