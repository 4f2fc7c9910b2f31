package integration

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/rollout"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// rollFleet is a fleet whose agents apply generations with the exec
// applier: the command records "<machine> <action> <revision>" in a shared
// log and writes the revision the machine runs; a revision "slow-*" takes a
// second; the health check fails on machine M for revision "bad-M".
type rollFleet struct {
	*fleet
	dir string
	mu  sync.Mutex
	// transfers records the etcd leadership moves the leader made.
	transfers []string
}

func newRollFleet(t *testing.T, cps, dps int) *rollFleet {
	f := newFleet(t)
	rf := &rollFleet{fleet: f, dir: f.TempDir()}
	for i := 1; i <= cps; i++ {
		cfg := rf.AgentConfig(fmt.Sprintf("cp-%d", i), i == 1)
		cfg.Applier = rf.applier(cfg.Name)
		rf.Start(cfg)
		if i == 1 {
			rf.WaitVoters(30*time.Second, "cp-1")
			for _, c := range []string{"c-1", "c-2"} {
				rf.StartCoordinator(c, func(c *coord) {
					c.Observer.OnRolloutStep = func(_ string, s rollout.Step) {
						if s.Action == rollout.TransferLeader {
							rf.mu.Lock()
							rf.transfers = append(rf.transfers, s.Nodes[0])
							rf.mu.Unlock()
						}
					}
				})
			}
		}
	}
	var names []string
	for i := 1; i <= cps; i++ {
		names = append(names, fmt.Sprintf("cp-%d", i))
	}
	rf.WaitVoters(90*time.Second, names...)
	for i := 1; i <= dps; i++ {
		cfg := rf.AgentConfig(fmt.Sprintf("dp-%d", i), false)
		cfg.Roles = []api.Role{api.RoleWorker}
		cfg.Applier = rf.applier(cfg.Name)
		n := rf.Start(cfg)
		testwait.For(t, 30*time.Second, cfg.Name+" ready", func() (bool, string) { return n.Agent.Healthy(), "not healthy" })
	}
	return rf
}

func (rf *rollFleet) applier(name string) apply.Applier {
	running := filepath.Join(rf.dir, name+".running")
	script := fmt.Sprintf(`case "$NICO_REVISION" in slow-*) sleep 1;; esac
echo "$NICO_MACHINE $NICO_ACTION ${NICO_REVISION:-none}" >> %s
echo "${NICO_REVISION:-none}" > %s`, filepath.Join(rf.dir, "log"), running)
	check := apply.CommandCheck{Runner: apply.ExecRunner{}, Cmd: apply.Cmd{Name: "sh", Args: []string{"-c", fmt.Sprintf("! grep -qx bad-%s %s", name, running)}}}
	x, err := apply.NewExec(apply.ExecConfig{Command: []string{"sh", "-c", script},
		Gate: apply.Gate{Checks: []apply.Check{check}, Deadline: 2 * time.Second, Interval: 100 * time.Millisecond}})
	if err != nil {
		rf.t.Fatal(err)
	}
	return x
}

// log returns the apply log lines that mention revision.
func (rf *rollFleet) log(revision string) []string {
	b, _ := os.ReadFile(filepath.Join(rf.dir, "log"))
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasSuffix(l, " "+revision) {
			out = append(out, l)
		}
	}
	return out
}

func (rf *rollFleet) running(name string) string {
	b, _ := os.ReadFile(filepath.Join(rf.dir, name+".running"))
	return strings.TrimSpace(string(b))
}

// startRollout files a rollout of revision.
func (rf *rollFleet) startRollout(name, revision string, edit func(*api.Rollout)) {
	rf.t.Helper()
	r := api.NewRollout(name)
	r.Metadata.CreatedAt = time.Now()
	r.Spec.Template = api.NixosConfigurationSpec{GitRepo: "https://git.example/fleet", Revision: revision}
	r.Spec.StepTimeout = api.Duration(60 * time.Second)
	if edit != nil {
		edit(r)
	}
	if err := rf.Store().Create(rf.t.Context(), store.RolloutKey(name), r); err != nil {
		rf.t.Fatal(err)
	}
}

// editRollout changes a rollout's spec with compare-and-swap.
func (rf *rollFleet) editRollout(name string, edit func(*api.Rollout)) {
	rf.t.Helper()
	st := rf.Store()
	for {
		r := &api.Rollout{}
		if err := st.Get(rf.t.Context(), store.RolloutKey(name), r); err != nil {
			rf.t.Fatal(err)
		}
		edit(r)
		err := st.Update(rf.t.Context(), store.RolloutKey(name), r)
		if err == nil {
			return
		}
		if !errors.Is(err, store.ErrConflict) {
			rf.t.Fatal(err)
		}
	}
}

func (rf *rollFleet) waitRollout(name string, within time.Duration, what string, cond func(*api.Rollout) bool) *api.Rollout {
	rf.t.Helper()
	return waitObj[api.Rollout](rf.fleet, within, store.RolloutKey(name), what, cond)
}

func phaseIs(p api.RolloutPhase) func(*api.Rollout) bool {
	return func(r *api.Rollout) bool { return r.Status.Phase == p }
}

// machines returns the machine names of log lines.
func machines(lines []string) []string {
	var out []string
	for _, l := range lines {
		out = append(out, strings.Fields(l)[0])
	}
	return out
}

// TestRollout rolls generations across 3 control-plane and 3 data-plane
// nodes on real etcd with the exec applier: the stated order with the etcd
// leader last after a leadership transfer; a generation that fails its
// health check on the second node is rolled back there and halts the
// rollout, with no other node touched; undo; the coordinator leader killed
// mid-rollout and the next one resuming; pause and resume.
func TestRollout(t *testing.T) {
	t.Parallel()
	rf := newRollFleet(t, 3, 3)
	ctx := t.Context()

	// 1. Order: data plane one at a time, then control-plane followers, the
	// etcd leader last after it handed leadership to an updated voter.
	leader := rf.EtcdLeader()
	rf.startRollout("r1", "v1", nil)
	r1 := rf.waitRollout("r1", 120*time.Second, "r1 succeeded", phaseIs(api.RolloutSucceeded))
	order := machines(rf.log("v1"))
	if len(order) != 6 || !slices.Equal(order[:3], []string{"dp-1", "dp-2", "dp-3"}) || order[5] != leader {
		t.Fatalf("apply order %v, etcd leader was %s", order, leader)
	}
	rf.mu.Lock()
	transfers := slices.Clone(rf.transfers)
	rf.mu.Unlock()
	if !slices.Equal(transfers, []string{leader}) {
		t.Fatalf("leadership transfers %v, want one away from %s", transfers, leader)
	}
	if now := rf.EtcdLeader(); now == leader {
		t.Fatalf("%s still leads etcd after it rolled last", now)
	}
	if done, total := r1.Counts(); done != 6 || total != 6 {
		t.Fatalf("r1 counts %d/%d", done, total)
	}
	for _, n := range r1.Status.Nodes {
		c := &api.NixosConfiguration{}
		if err := rf.Store().Get(ctx, store.NixosConfigKey(n.Name), c); err != nil || c.Status.AppliedGeneration != 1 || c.Status.Phase != api.GenerationApplied {
			t.Fatalf("%s config %+v %v", n.Name, c.Status, err)
		}
	}
	rf.WaitVoters(10*time.Second, "cp-1", "cp-2", "cp-3") // the step slot was released

	// 2. Bad on the second node: rolled back there, halted, nobody else touched.
	rf.startRollout("r2", "bad-dp-2", nil)
	r2 := rf.waitRollout("r2", 60*time.Second, "r2 halted", phaseIs(api.RolloutHalted))
	if r2.Status.HaltedNode != "dp-2" || !strings.Contains(r2.Status.HaltedReason, "health check failed") {
		t.Fatalf("halted at %s: %s", r2.Status.HaltedNode, r2.Status.HaltedReason)
	}
	if got := machines(rf.log("bad-dp-2")); !slices.Equal(got, []string{"dp-1", "dp-2"}) {
		t.Fatalf("nodes that applied bad-dp-2: %v", got)
	}
	if rf.running("dp-2") != "v1" || rf.running("dp-1") != "bad-dp-2" || rf.running("dp-3") != "v1" {
		t.Fatalf("running: dp-1 %s dp-2 %s dp-3 %s", rf.running("dp-1"), rf.running("dp-2"), rf.running("dp-3"))
	}
	c := &api.NixosConfiguration{}
	if err := rf.Store().Get(ctx, store.NixosConfigKey("dp-2"), c); err != nil || c.Status.Phase != api.GenerationFailed || c.Status.AppliedGeneration != 1 || !strings.Contains(c.Status.LastError, "health") {
		t.Fatalf("dp-2 status %+v %v", c.Status, err)
	}

	// 3. Undo: dp-1 and dp-2 go back to v1.
	rf.editRollout("r2", func(r *api.Rollout) { r.Spec.Undo = true })
	rf.waitRollout("r2", 60*time.Second, "r2 undone", phaseIs(api.RolloutUndone))
	for _, n := range []string{"dp-1", "dp-2", "dp-3", "cp-1"} {
		if rf.running(n) != "v1" {
			t.Fatalf("%s runs %s after undo", n, rf.running(n))
		}
	}

	// 4. The coordinator leader dies mid-rollout; the next one resumes.
	rf.startRollout("r3", "slow-v3", nil)
	rf.waitRollout("r3", 60*time.Second, "r3 at its 3rd step", func(r *api.Rollout) bool { return r.Status.Step >= 3 })
	old := rf.LeaderName()
	rf.mu.Lock()
	victim := rf.Coord(old)
	rf.mu.Unlock()
	victim.Crash()
	r3 := rf.waitRollout("r3", 120*time.Second, "r3 succeeded", phaseIs(api.RolloutSucceeded))
	if r3.Status.Leader == old {
		t.Fatalf("r3 finished by %s, the crashed leader", old)
	}
	applied := machines(rf.log("slow-v3"))
	sorted := slices.Sorted(slices.Values(applied))
	if !slices.Equal(sorted, []string{"cp-1", "cp-2", "cp-3", "dp-1", "dp-2", "dp-3"}) {
		t.Fatalf("slow-v3 applied by %v: each node exactly once", applied)
	}

	// 5. Pause after the first node, resume.
	rf.startRollout("r4", "v4", nil)
	rf.waitRollout("r4", 60*time.Second, "r4 first node done", func(r *api.Rollout) bool { d, _ := r.Counts(); return d >= 1 })
	rf.editRollout("r4", func(r *api.Rollout) { r.Spec.Paused = true })
	paused := rf.waitRollout("r4", 60*time.Second, "r4 paused", func(r *api.Rollout) bool { return r.Status.Phase == api.RolloutPaused })
	done, _ := paused.Counts()
	if len(paused.Status.Current) != 0 || len(rf.log("v4")) != done {
		t.Fatalf("paused with current %v, %d done, applied by %v", paused.Status.Current, done, rf.log("v4"))
	}
	rf.editRollout("r4", func(r *api.Rollout) { r.Spec.Paused = false })
	rf.waitRollout("r4", 120*time.Second, "r4 succeeded", phaseIs(api.RolloutSucceeded))
	if len(rf.log("v4")) != 6 {
		t.Fatalf("v4 applied by %v", rf.log("v4"))
	}
}
