package integration

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/apply/applytest"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// TestBadGenerationInput: with the NixOS applier on a fake machine, an
// unknown attribute, an unreachable repository and a revision that does not
// exist each make the node report Failed with the cause and halt the
// rollout, and nothing is switched.
func TestBadGenerationInput(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	rf := &rollFleet{fleet: f, dir: f.TempDir()}
	machine := applytest.New("/nix/store/initial-nixos-system-w-1")
	rf.Start(rf.AgentConfig("cp-1", true))
	rf.WaitVoters(30*time.Second, "cp-1")
	rf.StartCoordinator("c-1")
	cfg := rf.AgentConfig("w-1", false)
	cfg.Roles = []api.Role{api.RoleWorker}
	cfg.Applier = apply.NewNixOS(apply.NixOSConfig{WorkDir: rf.TempDir(), Runner: machine, Gate: apply.Gate{Deadline: 5 * time.Second, Interval: 50 * time.Millisecond}})
	n := rf.Start(cfg)
	testwait.For(t, 30*time.Second, "w-1 ready", func() (bool, string) { return n.Agent.Healthy(), "not healthy" })

	cases := []struct {
		name  string
		tmpl  api.NixosConfigurationSpec
		cause string
	}{
		{"unknown-attribute", api.NixosConfigurationSpec{GitRepo: "https://git.example/fleet", Revision: "good-1", Flake: "#unknown-attr"}, "does not provide attribute"},
		{"unreachable-repository", api.NixosConfigurationSpec{GitRepo: "https://unreachable.example/fleet", Revision: "good-1"}, "Could not resolve host"},
		{"nonexistent-revision", api.NixosConfigurationSpec{GitRepo: "https://git.example/fleet", Revision: "nonexistent"}, "couldn't find remote ref"},
	}
	for _, c := range cases {
		rf.startRollout(c.name, "", func(r *api.Rollout) { r.Spec.Template, r.Spec.Nodes = c.tmpl, []string{"w-1"} })
		r := rf.waitRollout(c.name, 60*time.Second, c.name+" halted", phaseIs(api.RolloutHalted))
		if r.Status.HaltedNode != "w-1" || !strings.Contains(r.Status.HaltedReason, c.cause) {
			t.Fatalf("%s: halted at %s: %s", c.name, r.Status.HaltedNode, r.Status.HaltedReason)
		}
		got := &api.NixosConfiguration{}
		if err := rf.Store().Get(t.Context(), store.NixosConfigKey("w-1"), got); err != nil || got.Status.Phase != api.GenerationFailed || !strings.Contains(got.Status.LastError, c.cause) {
			t.Fatalf("%s: status %+v %v", c.name, got.Status, err)
		}
		if sw := machine.Switched(); len(sw) != 0 || machine.Running() != "initial" {
			t.Fatalf("%s: switched %v, running %s", c.name, sw, machine.Running())
		}
	}
	// A good generation afterwards goes through, and its history keeps the failures.
	rf.startRollout("good", "good-1", func(r *api.Rollout) { r.Spec.Nodes = []string{"w-1"} })
	rf.waitRollout("good", 60*time.Second, "good succeeded", phaseIs(api.RolloutSucceeded))
	got := &api.NixosConfiguration{}
	if err := rf.Store().Get(t.Context(), store.NixosConfigKey("w-1"), got); err != nil || machine.Running() != "good-1" || got.Status.Toplevel != "/nix/store/good-1-nixos-system-w-1" || len(got.Status.History) != 4 {
		t.Fatalf("status %+v %v, running %s", got.Status, err, machine.Running())
	}
}

// TestAgentRestartDoesNotReapply: an agent started again does not apply a
// generation it already applied; it does apply the next one.
func TestAgentRestartDoesNotReapply(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	rf := &rollFleet{fleet: f, dir: f.TempDir()}
	rf.Start(rf.AgentConfig("cp-1", true))
	rf.WaitVoters(30*time.Second, "cp-1")
	rf.StartCoordinator("c-1")
	cfg := rf.AgentConfig("w-1", false)
	cfg.Roles = []api.Role{api.RoleWorker}
	cfg.Applier = rf.applier("w-1")
	n := rf.Start(cfg)
	testwait.For(t, 30*time.Second, "w-1 ready", func() (bool, string) { return n.Agent.Healthy(), "not healthy" })
	rf.startRollout("r1", "v1", func(r *api.Rollout) { r.Spec.Nodes = []string{"w-1"} })
	rf.waitRollout("r1", 60*time.Second, "r1 succeeded", phaseIs(api.RolloutSucceeded))

	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	cfg.Applier = rf.applier("w-1") // a fresh applier: only the store says what was applied
	n = rf.Start(cfg)
	testwait.For(t, 30*time.Second, "w-1 ready again", func() (bool, string) { return n.Agent.Healthy(), "not healthy" })
	// The next generation is applied; by then a re-apply of v1 would have
	// happened first (the agent works through its configuration in order).
	rf.startRollout("r2", "v2", func(r *api.Rollout) { r.Spec.Nodes = []string{"w-1"} })
	rf.waitRollout("r2", 60*time.Second, "r2 succeeded", phaseIs(api.RolloutSucceeded))
	if got := rf.log("v1"); len(got) != 1 {
		t.Fatalf("v1 applied %d times: %v", len(got), got)
	}
	if got := rf.log("v2"); len(got) != 1 {
		t.Fatalf("v2 applied %d times: %v", len(got), got)
	}
}

// TestRemovedNodeSwitchesToOnRemoveFlake: a node removed from the fleet
// applies its configuration's onRemoveFlake.
func TestRemovedNodeSwitchesToOnRemoveFlake(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	dir := f.TempDir()
	logPath := filepath.Join(dir, "log")
	f.Start(f.AgentConfig("cp-1", true))
	f.WaitVoters(30*time.Second, "cp-1")
	f.StartCoordinator("c-1")
	cfg := f.AgentConfig("w-1", false)
	cfg.Roles = []api.Role{api.RoleWorker}
	x, err := apply.NewExec(apply.ExecConfig{Command: []string{"sh", "-c", `echo "$NICO_MACHINE $NICO_FLAKE_ATTR $NICO_REVISION" >> ` + logPath}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Applier = x
	n := f.Start(cfg)
	testwait.For(t, 30*time.Second, "w-1 ready", func() (bool, string) { return n.Agent.Healthy(), "not healthy" })
	rf := &rollFleet{fleet: f, dir: dir}
	rf.startRollout("r1", "v1", func(r *api.Rollout) { r.Spec.Template.OnRemoveFlake, r.Spec.Nodes = "#released", []string{"w-1"} })
	rf.waitRollout("r1", 60*time.Second, "r1 succeeded", phaseIs(api.RolloutSucceeded))

	f.requestRemoval("w-1", false)
	select {
	case err := <-n.Done:
		n.Done <- err
		if !errors.Is(err, agent.ErrRemoved) {
			t.Fatalf("w-1 returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("removed worker did not stop")
	}
	b, _ := os.ReadFile(logPath)
	if got := strings.Split(strings.TrimSpace(string(b)), "\n"); len(got) != 2 || got[0] != "w-1 w-1 v1" || got[1] != "w-1 released v1" {
		t.Fatalf("applied: %q", got)
	}
	c := &api.NixosConfiguration{}
	if err := f.Store().Get(t.Context(), store.NixosConfigKey("w-1"), c); err != nil || !strings.Contains(c.Status.History[len(c.Status.History)-1].Message, "onRemoveFlake #released") {
		t.Fatalf("%+v %v", c.Status, err)
	}
}
