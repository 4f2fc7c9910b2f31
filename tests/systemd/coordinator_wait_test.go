package systemd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCoordinatorWaitsForItsIdentity starts nico-coordinator.service on a
// host that joins (hosts.nix cp2: seeds cp1, no coordinator etcd.endpoints)
// before its nico-agent.service, as a boot whose agent start is slow or
// failed does: the unit must not fail (a LoadCredential= of files the
// agent has not written yet fails the start before the program runs). It
// stays activating while the program logs that it waits for its identity,
// and its start job completes (READY) once the agent has joined and
// written pki/coordinator.crt, with the etcd endpoints learned from the
// mesh and no restart (NRestarts 0). It runs as root with no capability
// and sees, of /var/lib, pki.dir only.
func TestCoordinatorWaitsForItsIdentity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := newCluster(t)
	cp1 := c.boot(ctx, "cp1")
	mustStart(ctx, t, cp1, "nico-agent.service")
	cp2 := c.boot(ctx, "cp2")

	const unit = "nico-coordinator.service"
	job := make(chan string, 1)
	if _, err := cp2.sd.StartUnitContext(ctx, unit, "replace", job); err != nil {
		t.Fatal(err)
	}
	cp2.waitFor(ctx, "the coordinator waits for its identity, activating", func() error {
		st := cp2.prop(ctx, unit, "ActiveState")
		if st == "failed" || cp2.prop(ctx, unit, "NRestarts") != uint32(0) {
			t.Fatalf("%s before the agent joined: %v/%v, NRestarts %v, result %v, want activating",
				unit, st, cp2.prop(ctx, unit, "SubState"), cp2.prop(ctx, unit, "NRestarts"), cp2.prop(ctx, unit, "Result"))
		}
		if st != "activating" {
			return fmt.Errorf("%w: %v", errNotYet, st)
		}
		return cp2.journalHas(ctx, unit, "waiting for this machine's coordinator identity")
	})
	select {
	case res := <-job:
		t.Fatalf("%s's start job ended (%s) before the agent joined", unit, res)
	default:
	}

	start := time.Now()
	mustStart(ctx, t, cp2, "nico-agent.service")
	t.Logf("cp2: nico-agent.service active (a voter) %v after its start", time.Since(start).Round(time.Millisecond))
	select {
	case res := <-job:
		if res != "done" {
			t.Fatalf("%s's start job: %s, want done (READY)", unit, res)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s not active (READY) 60s after the agent joined: %v", unit, cp2.prop(ctx, unit, "ActiveState"))
	}
	t.Logf("cp2: %s active (READY) %v after the agent's start", unit, time.Since(start).Round(time.Millisecond))
	if n := cp2.prop(ctx, unit, "NRestarts"); n != uint32(0) {
		t.Errorf("%s restarted %v times, want 0", unit, n)
	}
	// What it runs with: no capability, and of /var/lib only pki.dir.
	pid := fmt.Sprint(cp2.prop(ctx, unit, "MainPID"))
	if out, err := cp2.Exec(ctx, "grep", "-x", `CapEff:[[:space:]]*0*`, "/proc/"+pid+"/status"); err != nil {
		st, _ := cp2.Exec(ctx, "grep", "^Cap", "/proc/"+pid+"/status")
		t.Errorf("the coordinator has capabilities: %v: %s%s", err, out, st)
	}
	for dir, want := range map[string]string{"/var/lib": "nico", "/var/lib/nico": "pki"} {
		out, err := cp2.Exec(ctx, "ls", "-A", "/proc/"+pid+"/root"+dir)
		if got := strings.TrimSpace(string(out)); err != nil || got != want {
			t.Errorf("the coordinator's %s holds %q (%v), want %q only", dir, got, err, want)
		}
	}

	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	defer lcancel()
	cp2.waitFor(lctx, "the coordinator learned its etcd endpoints from the mesh", func() error {
		return cp2.journalHas(ctx, unit, "etcd endpoints learned from gossip")
	})
}

// journalHas is nil once unit's journal holds a line containing s.
func (g *guest) journalHas(ctx context.Context, unit, s string) error {
	out, _ := g.Exec(ctx, "journalctl", "--no-pager", "-o", "cat", "-u", unit)
	if !strings.Contains(string(out), s) {
		return fmt.Errorf("%w: no %q in %s's journal", errNotYet, s, unit)
	}
	return nil
}
