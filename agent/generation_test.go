package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/store"
)

// TestGenerationsApplyNothingOnceAnUpgradeIsAsked: a generation that
// installs another nico-agent is applied once and left Applying for the
// new agent; the reconcile its own status write wakes applies it no
// second time (a second apply would report it Applied before the restart).
func TestGenerationsApplyNothingOnceAnUpgradeIsAsked(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	st, err := store.New(etcdtest.NewClient(t, cl.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	pathFile := filepath.Join(t.TempDir(), "agent-path")
	if err := os.WriteFile(pathFile, []byte("/nix/store/new-nico/bin/nico-agent\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	applier := &recordingApplier{}
	a := New(Config{Name: "w-1", Roles: []api.Role{api.RoleWorker}, RetryInterval: time.Hour, Applier: applier, AgentPathFile: pathFile}, nil, quietNotifier{}, logging.Test(t))
	a.Executable = func() (string, error) { return "/nix/store/old-nico/bin/nico-agent", nil }
	a.use(st.Client(), st)
	c := api.NewNixosConfiguration("w-1")
	c.Spec.Generation = 1
	if err := st.Put(t.Context(), store.NixosConfigKey("w-1"), c); err != nil {
		t.Fatal(err)
	}
	g := (&groups{rt: a.rt}).start(t.Context(), a.generations())
	defer g.stop()
	waitFor(t, 10*time.Second, "the upgrade asked for", a.supervisor.upgradeAsked)
	// The status write (Applying) wakes the controller again.
	waitFor(t, 10*time.Second, "the reconcile after the status write", func() bool {
		for _, h := range a.Health() {
			if h.Name == "generations" && h.Reconciles >= 2 && h.State == "waiting" {
				return true
			}
		}
		return false
	})
	applier.mu.Lock()
	applied := len(applier.applied)
	applier.mu.Unlock()
	if applied != 1 {
		t.Fatalf("generation applied %d times, want once: the new agent reports it", applied)
	}
	got := api.NewNixosConfiguration("w-1")
	if err := st.Get(t.Context(), store.NixosConfigKey("w-1"), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != api.GenerationApplying {
		t.Errorf("generation status %s, want Applying", got.Status.Phase)
	}
}
