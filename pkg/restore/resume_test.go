package restore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/member"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// busyFleet's Serve fails with a held port busy times, then serves.
type busyFleet struct {
	mu    sync.Mutex
	busy  int
	other error
	calls int
}

func (f *busyFleet) Stop(context.Context, string, *member.Fence) error     { return nil }
func (f *busyFleet) Restore(context.Context, string, string, uint64) error { return nil }
func (f *busyFleet) Rejoin(context.Context, string) error                  { return nil }
func (f *busyFleet) Client(context.Context) (*clientv3.Client, error)      { return nil, errors.New("none") }
func (f *busyFleet) Serve(ctx context.Context, node string, _ *FirstHold) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.other != nil {
		return 0, f.other
	}
	if f.calls <= f.busy {
		return 0, fmt.Errorf("member: cannot listen on https://127.0.0.1:1: %w", syscall.EADDRINUSE)
	}
	return 1, nil
}

// TestResumeWaitsForHeldPorts: a resumed run serves a member whose port
// the killed run's exiting etcd still holds once it is free; it gives up
// at ResumeWithin, and other errors end it at once.
func TestResumeWaitsForHeldPorts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := &Journal{ID: "r", Target: "m0", Others: []string{"m1"}, Step: StepRejoin}
	f := &busyFleet{busy: 2}
	r := &Runner{Fleet: f, Now: time.Now, Log: slog.New(slog.DiscardHandler)}
	if err := r.resume(ctx, j); err != nil || f.calls != 3 {
		t.Fatalf("resume: %v after %d calls, want served on the 3rd", err, f.calls)
	}
	f = &busyFleet{busy: 1000}
	r = &Runner{Fleet: f, Now: time.Now, Log: slog.New(slog.DiscardHandler), ResumeWithin: 250 * time.Millisecond}
	if err := r.resume(ctx, j); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("resume past ResumeWithin: %v, want the held port's error", err)
	}
	f = &busyFleet{other: member.ErrFenced}
	r = &Runner{Fleet: f, Now: time.Now, Log: slog.New(slog.DiscardHandler)}
	if err := r.resume(ctx, j); !errors.Is(err, member.ErrFenced) || f.calls != 1 {
		t.Fatalf("resume on a fenced dir: %v after %d calls, want it at once", err, f.calls)
	}
}
