package integration

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// TestAgentRestartsIntoTheAgentItsGenerationInstalls: a generation that
// installs another nico-agent (the file the NixOS module writes,
// /etc/nico/agent-path, names another binary after the switch) ends Run
// with ErrUpgraded once its activation and health checks passed, and the
// generation stays Applying until the agent started again reports it: the
// rollout is not done while the node restarts. The restarted agent's
// applier skips the generation (already running) and does not restart a
// second time, even though the file still names another binary than the
// one running (here the test binary: the loop guard).
func TestAgentRestartsIntoTheAgentItsGenerationInstalls(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	rf := &rollFleet{fleet: f, dir: f.TempDir()}
	rf.Start(rf.AgentConfig("cp-1", true))
	rf.WaitVoters(30*time.Second, "cp-1")
	rf.StartCoordinator("c-1")

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pathFile := filepath.Join(rf.dir, "agent-path")
	if err := os.WriteFile(pathFile, []byte(exe+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(rf.dir, "applied")
	newApplier := func() apply.Applier {
		// v2 is the generation that brings a new nico-agent: its
		// activation rewrites the agent path, as switching /etc would.
		script := fmt.Sprintf(`echo "$NICO_REVISION" >> %s
if [ "$NICO_REVISION" = v2 ]; then echo /nix/store/new-nico/bin/nico-agent > %s; fi`, logFile, pathFile)
		x, err := apply.NewExec(apply.ExecConfig{Command: []string{"sh", "-c", script}, StateFile: filepath.Join(rf.dir, "exec-state.json")})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	cfg := rf.AgentConfig("w-1", false)
	cfg.Roles = []api.Role{api.RoleWorker}
	cfg.Applier = newApplier()
	cfg.AgentPathFile = pathFile
	n := rf.Start(cfg)
	testwait.For(t, 30*time.Second, "w-1 ready", func() (bool, string) { return n.Agent.Healthy(), "not healthy" })

	// v1 keeps the agent: no restart.
	rf.startRollout("r1", "v1", func(r *api.Rollout) { r.Spec.Nodes = []string{"w-1"} })
	rf.waitRollout("r1", 60*time.Second, "r1 succeeded", phaseIs(api.RolloutSucceeded))
	select {
	case err := <-n.Done:
		t.Fatalf("w-1 stopped after a generation that keeps its agent: %v", err)
	default:
	}

	// v2 brings a new agent: Run ends with ErrUpgraded, v2 left Applying.
	rf.startRollout("r2", "v2", func(r *api.Rollout) { r.Spec.Nodes = []string{"w-1"} })
	select {
	case err := <-n.Done:
		n.Done <- err
		if !errors.Is(err, agent.ErrUpgraded) {
			t.Fatalf("w-1 returned %v, want ErrUpgraded", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("w-1 did not stop to restart into the new agent")
	}
	c := &api.NixosConfiguration{}
	if err := rf.Store().Get(t.Context(), store.NixosConfigKey("w-1"), c); err != nil {
		t.Fatal(err)
	}
	if c.Status.Phase != api.GenerationApplying || c.Status.AppliedGeneration == c.Spec.Generation {
		t.Fatalf("while w-1 restarts its generation status is %+v, want Applying and not applied", c.Status)
	}
	r := &api.Rollout{}
	if err := rf.Store().Get(t.Context(), store.RolloutKey("r2"), r); err != nil || r.Status.Phase == api.RolloutSucceeded {
		t.Fatalf("rollout r2 is %q while w-1 restarts (%v)", r.Status.Phase, err)
	}
	if err := n.Stop(); err != nil && !errors.Is(err, agent.ErrUpgraded) {
		t.Fatal(err)
	}

	// The service manager starts the agent again: it reports v2 without
	// running it a second time, and stays up.
	cfg.Applier = newApplier()
	n = rf.Start(cfg)
	rf.waitRollout("r2", 60*time.Second, "r2 succeeded", phaseIs(api.RolloutSucceeded))
	testwait.For(t, 30*time.Second, "w-1 ready again", func() (bool, string) { return n.Agent.Healthy(), "not healthy" })
	select {
	case err := <-n.Done:
		t.Fatalf("the restarted w-1 stopped again: %v", err)
	case <-time.After(2 * time.Second):
	}
	b, _ := os.ReadFile(logFile)
	if got := string(b); got != "v1\nv2\n" {
		t.Fatalf("activations run: %q, want v1 and v2 once each", got)
	}
}
