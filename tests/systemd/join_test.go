package systemd

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/tests/systemd/harness"
)

// TestJoinThroughSystemd grows the bootstrap host's cluster to three
// voters: cp2 and cp3 (own namespaces, on one bridge) boot with cp1 as
// their seed, and each agent's start job completes (READY) once its
// member is a voter, which the agent reached through the real systemd
// member runtime (pkg/member's Systemd over D-Bus starting etcd.service).
// cp3's agent is restarted while its member is a learner and resumes that
// learner. Then, on the three voters: a hung agent (SIGSTOP) is killed by
// systemd's watchdog and restarted; a removed node's agent exits 3 and is
// not restarted.
func TestJoinThroughSystemd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := newCluster(t)
	cp1 := c.boot(ctx, "cp1")
	mustStart(ctx, t, cp1, "nico-agent.service")
	mustStart(ctx, t, cp1, "nico-coordinator.service")

	cp2 := c.boot(ctx, "cp2")
	start := time.Now()
	mustStart(ctx, t, cp2, "nico-agent.service")
	t.Logf("cp2: nico-agent.service active (a voter) %v after its start", time.Since(start).Round(time.Millisecond))
	wantVoters(ctx, t, cp1, "cp1", "cp2")
	if out, err := cp2.Exec(ctx, "grep", "-x", "ETCD_INITIAL_CLUSTER_STATE=existing", "/run/nico/etcd.env"); err != nil {
		t.Fatalf("cp2's etcd.env: %v: %s", err, out)
	}

	t.Run("RestartMidJoinResumesTheLearner", func(t *testing.T) {
		// cp3's etcd.service waits at a gate the test opens (a drop-in of
		// the test's), so that the restart comes while the learner is
		// added and its etcd's start job is pending: mid-join, for sure.
		cp3 := c.boot(ctx, "cp3", func(cfg *harness.Config) {
			cfg.Files["/etc/systemd/system/etcd.service.d/nico-test-gate.conf"] = harness.File{Data: []byte(etcdGate)}
		})
		start := time.Now()
		cp3.startNoBlock(ctx, "nico-agent.service")
		var learner member
		cp1.waitFor(ctx, "cp3's member is added as a learner", func() error {
			ms, err := cp1.members(ctx)
			if err != nil {
				return err
			}
			m, ok := memberOf(ms, "cp3")
			if !ok {
				return fmt.Errorf("%w: %+v", errNotYet, ms)
			}
			if m.Status == "voter" {
				t.Fatalf("cp3 became a voter behind the gate: %+v", ms)
			}
			learner = m
			return nil
		})
		cp3.waitFor(ctx, "cp3's etcd.service waits at the gate", func() error {
			if st := cp3.prop(ctx, "etcd.service", "ActiveState"); st != "activating" {
				return fmt.Errorf("%w: etcd.service %v", errNotYet, st)
			}
			return nil
		})
		t.Logf("cp3's member %s is %s %v after the agent's start; restarting the agent", learner.ID, learner.Status, time.Since(start).Round(time.Millisecond))
		start = time.Now()
		done := make(chan string, 1)
		if _, err := cp3.sd.RestartUnitContext(ctx, "nico-agent.service", "replace", done); err != nil {
			t.Fatal(err)
		}
		if out, err := cp3.Exec(ctx, "touch", "/run/nico-test-etcd-go"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		select {
		case res := <-done:
			if res != "done" {
				t.Fatalf("nico-agent.service restarted mid-join did not become active (READY): job %s", res)
			}
		case <-time.After(90 * time.Second):
			t.Fatal("nico-agent.service restarted mid-join was not active (READY) within 90s")
		}
		t.Logf("cp3's restarted agent is active (READY) %v after its restart", time.Since(start).Round(time.Millisecond))
		ms, err := cp1.members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := memberOf(ms, "cp3")
		// A restart mid-join cancels the agent's start of etcd.service; the
		// stop job it then asks for is ordered after the agent's own stop
		// (After=etcd.service), so waiting for it held the restart for
		// the whole wait (60 s; pkg/member's stopUnit).
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("the restart mid-join took %v, want well under 30s", d.Round(time.Second))
		}
		if m.ID != learner.ID || m.Status != "voter" {
			t.Fatalf("cp3 after the restart: %+v, want the learner %s, a voter", m, learner.ID)
		}
		if got := voters(ms); !slices.Equal(got, []string{"cp1", "cp2", "cp3"}) {
			t.Fatalf("voters %v, want [cp1 cp2 cp3]", got)
		}
	})
	if t.Failed() {
		return
	}
	cp3 := c.guests["cp3"]

	t.Run("WatchdogKillsAHungAgent", func(t *testing.T) {
		// A hung agent stops sending WATCHDOG=1: SIGSTOP stops all of it.
		pid := cp2.prop(ctx, "nico-agent.service", "MainPID")
		restarts := cp2.prop(ctx, "nico-agent.service", "NRestarts").(uint32)
		if out, err := cp2.Exec(ctx, "kill", "-STOP", fmt.Sprint(pid)); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		cp2.waitFor(ctx, "systemd restarts the hung agent", func() error {
			n := cp2.prop(ctx, "nico-agent.service", "NRestarts").(uint32)
			st := cp2.prop(ctx, "nico-agent.service", "ActiveState")
			if n == restarts || st != "active" {
				return fmt.Errorf("%w: NRestarts %d, %v", errNotYet, n, st)
			}
			return nil
		})
		// systemd's own line, which may reach the journal a moment after
		// the restart.
		jctx, jcancel := context.WithTimeout(ctx, 10*time.Second)
		defer jcancel()
		cp2.waitFor(jctx, "the watchdog's timeout in the agent's journal", func() error {
			return cp2.journalHas(ctx, "nico-agent", "Watchdog timeout")
		})
		wantVoters(ctx, t, cp1, "cp1", "cp2", "cp3")
	})

	t.Run("RemovedAgentExits3AndStaysDown", func(t *testing.T) {
		// The leader refuses (exit 3) while a voter is unhealthy or its
		// mesh member suspect, as cp2 may still be after its restart.
		cp1.waitFor(ctx, "the removal of cp3 is accepted and done", func() error {
			out, err := cp1.sh(ctx, "nicoctl remove node cp3 --wait-timeout 2m")
			if err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) && ee.ExitCode() == 3 {
					return fmt.Errorf("%w: %s", errNotYet, out)
				}
				t.Fatalf("nicoctl remove node cp3: %v: %s", err, out)
			}
			return nil
		})
		cp3.waitFor(ctx, "cp3's agent exits", func() error {
			if st := cp3.prop(ctx, "nico-agent.service", "ActiveState"); st != "failed" && st != "inactive" {
				return fmt.Errorf("%w: %v/%v", errNotYet, st, cp3.prop(ctx, "nico-agent.service", "SubState"))
			}
			return nil
		})
		// systemd decides at the exit: a restart would show as auto-restart.
		code, sub := cp3.prop(ctx, "nico-agent.service", "ExecMainStatus"), cp3.prop(ctx, "nico-agent.service", "SubState")
		if code != int32(3) || sub == "auto-restart" {
			t.Fatalf("cp3's agent: exit status %v, %v; want 3 and no restart", code, sub)
		}
		wantVoters(ctx, t, cp1, "cp1", "cp2")
	})
}

// etcdGate holds etcd.service's start until /run/nico-test-etcd-go exists.
const etcdGate = `[Service]
ExecStartPre=/bin/sh -c 'until [ -e /run/nico-test-etcd-go ]; do sleep 0.05; done'
`

func mustStart(ctx context.Context, t *testing.T, g *guest, unit string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := g.start(sctx, unit); err != nil {
		t.Fatalf("%v (NRestarts %v)", err, g.prop(ctx, unit, "NRestarts"))
	}
}

func wantVoters(ctx context.Context, t *testing.T, g *guest, names ...string) {
	t.Helper()
	g.waitFor(ctx, fmt.Sprintf("voters %v", names), func() error {
		ms, err := g.members(ctx)
		if err != nil {
			return err
		}
		if got := voters(ms); !slices.Equal(got, names) {
			return fmt.Errorf("%w: voters %v", errNotYet, got)
		}
		return nil
	})
}
