package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// applyScript is the demo agents' exec applier: it records each generation
// it applies and takes a moment, like a switch would.
const applyScript = `echo "$NICO_MACHINE $NICO_ACTION generation $NICO_GENERATION revision $NICO_REVISION" >> "$(dirname "$0")/generations.log"
sleep 0.3
`

// applierArgs are the agents' flags for the exec applier.
func (d *demo) applierArgs() []string {
	script := filepath.Join(d.dir, "apply.sh")
	if _, err := os.Stat(script); err != nil {
		_ = os.WriteFile(script, []byte(applyScript), 0o755)
	}
	return []string{"--generations.applier", "exec", "--generations.command", "/bin/sh," + script}
}

// rolloutName names the demo's rollout after what it rolls, not after a
// generation number: generations are counted per node.
const rolloutName = "demo-revision-v2"

// rollout rolls a new generation across the fleet and shows the order the
// nodes applied it in.
func (d *demo) rollout(ctx context.Context) error {
	if err := d.ctlMust(ctx, "rollout", "start", rolloutName, "--git-repo", "https://example.org/fleet.git", "--revision", "v2"); err != nil {
		return err
	}
	// The leader lists the nodes first; follow it from there.
	if err := d.waitRolloutPlanned(ctx, rolloutName); err != nil {
		return err
	}
	if err := d.ctlMust(ctx, "rollout", "status", "-w", rolloutName); err != nil {
		return err
	}
	d.ctl(ctx, "rollout", "status", rolloutName)
	say("GENERATION counts each node's own configurations: revision v2 is the first one nico gave these nodes, so it is generation 1 on each")
	b, err := os.ReadFile(filepath.Join(d.dir, "generations.log"))
	if err != nil {
		return fmt.Errorf("rollout: no node applied anything: %w", err)
	}
	say("the nodes applied it in this order (followers first, the etcd leader last):\n%s", strings.TrimSpace(string(b)))
	return nil
}
