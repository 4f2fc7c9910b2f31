package systemd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// switchTo does to a running guest what switch-to-configuration does for
// the files and units of the fixture host next (a later generation of the
// same host): it writes next's files (units, /etc, store), reloads
// systemd, and for each active unit whose file changed reloads it (only
// X-Reload-Triggers changed, or X-ReloadIfChanged=true), leaves it alone
// (X-RestartIfChanged=false) or restarts it. It returns what it did, per
// unit; a reload that fails, or the restart of a Type=oneshot unit (whose
// run is its work), is "reload failed: " or "restart failed: " and
// systemctl's output, as switch-to-configuration reports it and goes on.
func (g *guest) switchTo(ctx context.Context, next string) map[string]string {
	t := g.t
	t.Helper()
	root := fmt.Sprintf("/proc/%d/root", g.PID)
	changed := map[string]bool{}
	triggersOnly := map[string]bool{}
	for p, f := range hostFiles(t, next) {
		dst := root + p
		old, _ := os.ReadFile(dst)
		if bytes.Equal(old, f.Data) {
			continue
		}
		if dir := path.Dir(p); dir == "/etc/systemd/system" {
			changed[path.Base(p)] = true
			triggersOnly[path.Base(p)] = len(old) > 0 && withoutTriggers(old) == withoutTriggers(f.Data)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(dst)
		if err := os.WriteFile(dst, f.Data, f.Mode); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := g.Exec(ctx, "systemctl", "daemon-reload"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	did := map[string]string{}
	for unit := range changed {
		if g.prop(ctx, unit, "ActiveState") != "active" {
			continue
		}
		text := string(hostFiles(t, next)["/etc/systemd/system/"+unit].Data)
		verb := "restart"
		switch {
		case triggersOnly[unit] || strings.Contains(text, "\nX-ReloadIfChanged=true\n"):
			verb = "reload"
		case strings.Contains(text, "\nX-RestartIfChanged=false\n"):
			verb = "none"
		}
		did[unit] = verb
		if verb == "none" {
			continue
		}
		out, err := g.Exec(ctx, "systemctl", verb, unit)
		switch {
		case err != nil && (verb == "reload" || strings.Contains(text, "\nType=oneshot\n")):
			did[unit] = fmt.Sprintf("%s failed: %v: %s", verb, err, out)
		case err != nil:
			t.Fatalf("%v: %s", err, out)
		}
	}
	return did
}

// withoutTriggers is a unit file without its X-Reload-Triggers line.
func withoutTriggers(unit []byte) string {
	var keep []string
	for _, l := range strings.Split(string(unit), "\n") {
		if !strings.HasPrefix(l, "X-Reload-Triggers=") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// TestChangedSettingsReachTheAgent switches the bootstrap host to a
// generation whose only change is the agent's settings (hosts.nix
// cp1-switched: log.level = "debug"), as `nixos-rebuild switch` would,
// and wants the new settings in a running agent within a minute: an agent
// process started after the switch, whose --config file holds them (issue
// 12, defect 11). The switch itself must not restart the agent
// (restartIfChanged = false): the agent notices and exits 4 at a safe point.
func TestChangedSettingsReachTheAgent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := newCluster(t)
	cp1 := c.boot(ctx, "cp1")
	mustStart(ctx, t, cp1, "nico-agent.service")
	mustStart(ctx, t, cp1, "nico-coordinator.service")
	want := hostFiles(t, "cp1-switched")["/etc/nico/agent.yaml"].Data
	started := cp1.prop(ctx, "nico-agent.service", "ExecMainStartTimestampMonotonic")

	did := cp1.switchTo(ctx, "cp1-switched")
	t.Logf("switch: %v", did)
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	cp1.waitFor(wctx, "the running agent uses the new settings", func() error {
		// A new agent process: one started before the switch read the
		// old settings, whatever file it names now.
		if cp1.prop(ctx, "nico-agent.service", "ExecMainStartTimestampMonotonic") == started {
			return fmt.Errorf("%w: the agent started before the switch still runs", errNotYet)
		}
		pid := cp1.prop(ctx, "nico-agent.service", "MainPID")
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/proc/%v/cmdline", cp1.PID, pid))
		if err != nil {
			return err
		}
		args := strings.Split(string(cmdline), "\x00")
		for i, a := range args {
			if a == "--config" && i+1 < len(args) {
				got, err := os.ReadFile(fmt.Sprintf("/proc/%d/root%s", cp1.PID, args[i+1]))
				if err != nil {
					return err
				}
				if !bytes.Equal(got, want) {
					return fmt.Errorf("%w: the agent (pid %v) runs with %s, the old settings", errNotYet, pid, args[i+1])
				}
				return nil
			}
		}
		return fmt.Errorf("no --config in the agent's command line %q", args)
	})
}
