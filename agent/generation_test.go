package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/store"
)

// TestGenerationsApplyNothingOnceAnUpgradeIsAsked: a generation that
// installs another nico-agent is applied once and left Applying for the
// new agent; the reconcile its own status write wakes applies it no
// second time (a second apply would report it Applied before the restart).
func TestGenerationsApplyNothingOnceAnUpgradeIsAsked(t *testing.T) {
	st := oneMemberStore(t)
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

// gatedApplier applies a generation once the test lets it: it says which
// one started, then waits for release.
type gatedApplier struct {
	started chan int64
	release chan struct{}
}

func (g *gatedApplier) Apply(ctx context.Context, gen apply.Generation) (apply.Result, error) {
	g.started <- gen.Number
	select {
	case <-g.release:
		return apply.Result{Toplevel: "/nix/store/gen"}, nil
	case <-ctx.Done():
		return apply.Result{}, ctx.Err()
	}
}

func (g *gatedApplier) Current(context.Context) (string, error) { return "/nix/store/gen", nil }

// TestGenerationReport: a generation's outcome is written onto the
// configuration its Applying mark left, in the next revision; a spec
// written while it applied is kept, the outcome written onto it.
func TestGenerationReport(t *testing.T) {
	st := oneMemberStore(t)
	ctx := t.Context()
	for _, meanwhile := range []bool{false, true} {
		name := fmt.Sprintf("w-%d", map[bool]int{false: 1, true: 2}[meanwhile])
		ap := &gatedApplier{started: make(chan int64, 1), release: make(chan struct{})}
		a := New(Config{Name: name, Roles: []api.Role{api.RoleWorker}, RetryInterval: time.Hour, Applier: ap}, nil, quietNotifier{}, logging.Test(t))
		a.use(st.Client(), st)
		c := api.NewNixosConfiguration(name)
		c.Spec.Generation = 1
		if err := st.Put(ctx, store.NixosConfigKey(name), c); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- a.generationRunner().applyDesired(ctx) }()
		if gen := <-ap.started; gen != 1 {
			t.Fatalf("%s: applying generation %d, want 1", name, gen)
		}
		mark := api.NewNixosConfiguration(name)
		if err := st.Get(ctx, store.NixosConfigKey(name), mark); err != nil {
			t.Fatal(err)
		}
		if mark.Status.Phase != api.GenerationApplying {
			t.Fatalf("%s: status %s while applying, want Applying", name, mark.Status.Phase)
		}
		if meanwhile {
			mark.Spec.OnRemoveFlake = "#released"
			if err := st.Update(ctx, store.NixosConfigKey(name), mark); err != nil {
				t.Fatal(err)
			}
		}
		close(ap.release)
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := api.NewNixosConfiguration(name)
		if err := st.Get(ctx, store.NixosConfigKey(name), got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != api.GenerationApplied || got.Status.AppliedGeneration != 1 || got.Status.Toplevel != "/nix/store/gen" {
			t.Errorf("%s: status %+v, want generation 1 Applied", name, got.Status)
		}
		if meanwhile && got.Spec.OnRemoveFlake != "#released" {
			t.Errorf("%s: the spec written while it applied was lost: %+v", name, got.Spec)
		}
		if got.Metadata.Revision != mark.Metadata.Revision+1 {
			t.Errorf("%s: outcome at revision %d, want %d: one write after the last", name, got.Metadata.Revision, mark.Metadata.Revision+1)
		}
	}
}
