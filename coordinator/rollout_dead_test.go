package coordinator

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
)

// TestRolloutDoesNotWaitForAReplacedMachine (real etcd, injected clock):
// a machine that dies while its rollout step waits for it halts the
// rollout once the liveness record has seen it dead past the EtcdCluster's
// replaceDeadMembersAfter (it is being replaced), and the change slot is
// free again, long before the step timeout. Without that policy the
// rollout keeps waiting.
func TestRolloutDoesNotWaitForAReplacedMachine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		replace time.Duration
		halts   bool
	}{
		{"replaceDeadMembersAfter 1m", time.Minute, true},
		{"never replaced", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newKCHarness(t)
			ec := api.NewEtcdCluster()
			ec.Spec.Policy.ReplaceDeadMembersAfter = api.Duration(tc.replace)
			if err := h.st.PutObject(t.Context(), ec); err != nil {
				t.Fatal(err)
			}
			h.machine("cp-1", "role", "cp")
			h.machine("dp-1", "role", "dp")
			h.machine("dp-2", "role", "dp")
			h.probing = []string{api.ComponentAPIServer, api.ComponentControllerManager, api.ComponentScheduler}
			h.create(selectorCluster("k1", 1, 2))
			h.untilPhase(api.ClusterReady)
			h.untilInSync()

			// dp-1 takes the new configuration and never reports: it died.
			h.hold["dp-1"] = true
			h.update(func(kc *api.KubernetesCluster) { kc.Spec.GitRepo = "https://git.example/next" })
			var ro *api.Rollout
			for range 10 {
				h.pass()
				if ro = last(h.rollouts()); ro.Node("dp-1").Phase == api.NodeApplying {
					break
				}
			}
			if ro.Node("dp-1").Phase != api.NodeApplying {
				t.Fatalf("dp-1 not in flight: %+v", ro.Status)
			}
			lv := api.NewLiveness()
			lv.Status.Nodes = map[string]api.NodeLiveness{"dp-1": {State: string(membership.LiveDead), Since: h.now, Reason: "gossip"}}
			if err := h.st.PutObject(t.Context(), lv); err != nil {
				t.Fatal(err)
			}

			h.passFor(50 * time.Second)
			if ro = last(h.rollouts()); ro.Status.Phase != api.RolloutRunning {
				t.Fatalf("dead 50s, under replaceDeadMembersAfter: rollout %s: %s", ro.Status.Phase, ro.Status.HaltedReason)
			}
			h.passFor(15 * time.Second)
			ro = last(h.rollouts())
			if !tc.halts {
				if ro.Status.Phase != api.RolloutRunning {
					t.Fatalf("no replacement policy: the rollout should wait its step timeout; %s: %s", ro.Status.Phase, ro.Status.HaltedReason)
				}
				return
			}
			if ro.Status.Phase != api.RolloutHalted || ro.Status.HaltedNode != "dp-1" ||
				!strings.Contains(ro.Status.HaltedReason, "dp-1 is dead for 1m") || !strings.Contains(ro.Status.HaltedReason, "being replaced") {
				t.Fatalf("rollout %s, halted at %q: %s", ro.Status.Phase, ro.Status.HaltedNode, ro.Status.HaltedReason)
			}
			if kv, err := h.st.GetKV(t.Context(), store.ActiveOpKey); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the halted rollout still holds the change slot: %v %v", kv, err)
			}
			t.Logf("halted: %s", ro.Status.HaltedReason)
		})
	}
}

func last(rs []*api.Rollout) *api.Rollout { return rs[len(rs)-1] }
