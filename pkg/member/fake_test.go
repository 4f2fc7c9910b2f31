package member_test

import (
	"context"
	"errors"
	"testing"

	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/member/membertest"
)

func TestFakeContract(t *testing.T) {
	t.Parallel()
	lifecycleContract(t, plain(func() member.Runtime { return membertest.NewFake() }))
}

func TestFakeInjectedExits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := membertest.NewFake()
	cfg := newConfig(t, "fake")

	boom := errors.New("boom")
	f.FailStart(func(member.Config) error { return boom })
	if err := f.Start(ctx, cfg); !errors.Is(err, boom) {
		t.Fatalf("Start with injected failure = %v, want boom", err)
	}
	if !errors.Is(f.Err(), boom) || f.Running() {
		t.Fatalf("after failed Start: Err %v, Running %v", f.Err(), f.Running())
	}
	f.FailStart(nil)

	if err := f.Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	f.Crash(boom)
	<-f.Done()
	if !errors.Is(f.Err(), boom) {
		t.Fatalf("Err after Crash = %v, want boom", f.Err())
	}

	if err := f.Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	f.Remove()
	<-f.Done()
	if !errors.Is(f.Err(), member.ErrRemoved) {
		t.Fatalf("Err after Remove = %v, want ErrRemoved", f.Err())
	}
	if err := f.Stop(ctx); err != nil || !errors.Is(f.Err(), member.ErrRemoved) {
		t.Fatalf("Stop after Remove = %v and Err %v; want nil and ErrRemoved kept", err, f.Err())
	}
	if n := len(f.Starts()); n != 3 {
		t.Fatalf("Starts recorded %d, want 3", n)
	}
}
