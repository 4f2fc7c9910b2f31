package ctl

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/events"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
)

// TestEventsWatchARealRemoval: events -w follows the removal of a voter
// that a real coordinator carries out, and names each step the executor
// journals (none is left an unnamed OpStep).
func TestEventsWatchARealRemoval(t *testing.T) {
	c := etcdtest.Start(t, 2)
	eps := c.Endpoints()[:1] // as in TestRemoveThroughLeader
	st, err := store.New(etcdtest.NewClient(t, eps...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	cst, err := store.New(etcdtest.NewClient(t, eps...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	registerNode(t, st, "cp-1", c.Members[0])
	registerNode(t, st, "cp-2", c.Members[1])
	co := coordinator.New(coordinator.Config{
		Name: "coord-1", SessionTTL: 2 * time.Second, ResyncInterval: 200 * time.Millisecond, HealthTimeout: time.Second,
		Policy: membership.DefaultPolicy,
	}, cst, slog.New(slog.NewTextHandler(tWriter{t}, nil)))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- co.Run(ctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("coordinator: %v", err)
		}
	}()
	waitLeader(t, st, "coord-1")

	w := watchEvents(t, eps, "-o", "json", "--for", "node/cp-2")
	if e := w.next(t); e.Reason != events.Registered {
		t.Fatalf("first event %+v, want cp-2's registration", e)
	}
	defer w.stop(t)
	run(t, eps, "remove", "node", "cp-2", "--wait-timeout", "60s").want(t, 0, []string{"removal of cp-2: Done"}, nil)
	var steps []string
	for {
		e := w.next(t)
		if !e.About("cp-2") {
			t.Errorf("event %+v is not about cp-2", e)
		}
		if e.Kind != api.KindOperation && e.Kind != api.KindRemoveRequest {
			continue // liveness: cp-2 has no agent here
		}
		steps = append(steps, e.Reason)
		if e.Reason == events.Removed {
			break
		}
	}
	got := strings.ReplaceAll(strings.Join(steps, " "), "LeadershipMoved ", "") // only if m1 led
	if got != "RemovalRequested RemovalStarted RemovingMember Removed" {
		t.Fatalf("removal steps: %s", strings.Join(steps, " "))
	}
}
