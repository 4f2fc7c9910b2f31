package systemd

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/tests/systemd/harness"
)

// newAgentStore is the store path of the "new" nico of the simulated
// switch: the same programs, bound at another path.
const newAgentStore = "/nix/store/11111111111111111111111111111111-nico-new"

// switchScript is the exec applier's command on the test's hosts
// (hosts.nix): it does what switch-to-configuration does for a generation
// that brings another nico-agent: the unit's ExecStart names the new
// agent (a drop-in here, a new unit file on NixOS), systemd reloads, and
// /etc/nico/agent-path names it too. It never restarts the agent
// (restartIfChanged = false).
const switchScript = `#!/bin/sh
set -eu
[ "$NICO_ACTION" = apply ] || exit 0
mkdir -p /etc/systemd/system/nico-agent.service.d
printf '[Service]\nExecStart=\nExecStart=%s/bin/nico-agent --config %s\n' '` + newAgentStore + `' '%CONFIG%' > /etc/systemd/system/nico-agent.service.d/switch.conf
systemctl daemon-reload
echo '` + newAgentStore + `/bin/nico-agent' > /etc/nico/agent-path
`

// TestAgentRestartsIntoTheNewAgent rolls a generation whose (simulated)
// switch installs another nico-agent onto the bootstrap host: the agent
// applies it, exits 4, and systemd starts the new agent at once
// (RestartForceExitStatus=4; SuccessExitStatus=4 keeps the unit out of
// failed), which reports the generation.
func TestAgentRestartsIntoTheNewAgent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := newCluster(t)
	files := hostFiles(t, "cp1")
	unit := string(files["/etc/systemd/system/nico-agent.service"].Data)
	m := regexp.MustCompile(`--config (\S+)`).FindStringSubmatch(unit)
	if m == nil {
		t.Fatalf("no --config in cp1's nico-agent.service:\n%s", unit)
	}
	cp1 := c.boot(ctx, "cp1", func(cfg *harness.Config) {
		cfg.Files["/etc/nico-test/switch"] = harness.File{Data: []byte(strings.ReplaceAll(switchScript, "%CONFIG%", m[1])), Mode: 0o755}
		cfg.Binds = append(cfg.Binds, harness.Bind{Src: programs(t), Dst: newAgentStore + "/bin", RO: true})
	})
	mustStart(ctx, t, cp1, "nico-agent.service")
	mustStart(ctx, t, cp1, "nico-coordinator.service")
	restarts := cp1.prop(ctx, "nico-agent.service", "NRestarts").(uint32)

	if out, err := cp1.sh(ctx, "nicoctl rollout start v2 --git-repo https://git.example/fleet --revision 4f1c2e9 --step-timeout 2m"); err != nil {
		t.Fatalf("nicoctl rollout start: %v: %s", err, out)
	}
	cp1.waitFor(ctx, "the rollout of v2 is done", func() error {
		out, err := cp1.sh(ctx, "nicoctl rollout status v2 -o json")
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		if strings.Contains(out, `"phase": "Halted"`) {
			t.Fatalf("the rollout of v2 halted: %s", out)
		}
		if !strings.Contains(out, `"phase": "Succeeded"`) && !strings.Contains(out, `"phase":"Succeeded"`) {
			return fmt.Errorf("%w: %s", errNotYet, out)
		}
		return nil
	})
	if n := cp1.prop(ctx, "nico-agent.service", "NRestarts").(uint32); n != restarts+1 {
		t.Fatalf("nico-agent.service restarted %d times during the rollout, want 1", n-restarts)
	}
	if st := cp1.prop(ctx, "nico-agent.service", "ActiveState"); st != "active" {
		t.Fatalf("nico-agent.service is %v, want active", st)
	}
	pid := cp1.prop(ctx, "nico-agent.service", "MainPID")
	exe, err := cp1.Exec(ctx, "readlink", fmt.Sprintf("/proc/%v/exe", pid))
	if err != nil || strings.TrimSpace(string(exe)) != newAgentStore+"/bin/nico-agent" {
		t.Fatalf("the running agent is %q (%v), want the new one %s/bin/nico-agent", exe, err, newAgentStore)
	}
	// The old agent's last lines reach the journal through its output
	// stream, maybe after the new agent started: wait for them.
	jctx, jcancel := context.WithTimeout(ctx, 10*time.Second)
	defer jcancel()
	cp1.waitFor(jctx, "the old agent's exit-4 line in its journal", func() error {
		return cp1.journalHas(ctx, "nico-agent", "exiting so that the service manager starts the nico-agent of the new generation")
	})
}
