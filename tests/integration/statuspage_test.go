package integration

import (
	"context"
	"testing"
	"time"

	"github.com/homystack/nico/coordinator/statuspage"
	"github.com/homystack/nico/coordinator/statuspage/statuspagetest"
)

// TestStatusPageShowsAJoinLive: the status page, served over a real fleet
// (a bootstrap agent, a real coordinator leading), is open in real headless
// Chromium while a second agent joins through the coordinator: the page
// shows the learner the leader added (held unstarted by a gate), then the
// voter it promoted, without a reload. Screenshots are kept (paths in the
// log).
func TestStatusPageShowsAJoinLive(t *testing.T) {
	t.Parallel()
	statuspagetest.Chromium(t) // skip before starting a fleet
	f := newFleet(t)
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	f.StartCoordinator("c-1")

	srv := &statuspage.Server{Listen: "127.0.0.1:0", Hub: &statuspage.Hub{Store: f.Store(), Debounce: 100 * time.Millisecond}}
	if err := srv.Bind(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("status page: %v", err)
		}
	}()
	artifacts := statuspagetest.ArtifactsDir(t, "integration-statuspage")
	b := statuspagetest.NewBrowser(t, ctx)
	b.Load("http://"+srv.Addr()+"/", `#member-cp-1[data-role="voter"]`)
	b.WaitFor(`body:not(.stale) #conn`)

	rt := &gated{Runtime: f.NewRuntime(), open: make(chan struct{})}
	f.StartWith(f.AgentConfig("cp-2", false), rt)
	b.WaitFor(`#members tr[data-role="learner"]`) // added by the leader, not started: no name yet
	b.WaitFor(`#op[data-step="Learner"]`)
	b.Screenshot(artifacts, "join-learner.png")
	close(rt.open)
	f.WaitVoters(60*time.Second, "cp-1", "cp-2")
	b.WaitFor(`#member-cp-2[data-role="voter"]`)
	b.WaitFor(`#node-cp-2[data-member="voter"]`)
	if b.Reloaded() {
		t.Error("the page was reloaded: the join must show up live")
	}
	b.Screenshot(artifacts, "join-voter.png")
	b.CheckOnlyLoopback()
}
