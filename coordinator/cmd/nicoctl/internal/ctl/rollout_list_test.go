package ctl

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
)

// TestGetRollouts: get rollouts lists every rollout, newest first, with
// its phase, nodes done of total, the current node or where it halted;
// -o json gives the objects; no rollout is an empty list, not an error.
func TestGetRollouts(t *testing.T) {
	c := etcdtest.Start(t, 1)
	eps := c.Endpoints()
	st := newStore(t, c)
	ctx := testCtx(t)

	r := run(t, eps, "get", "rollouts")
	r.want(t, ExitOK, []string{"NAME", "PHASE", "NODES", "CURRENT", "AGE", "MESSAGE"}, nil)
	if n := len(strings.Split(strings.TrimSpace(r.stdout), "\n")); n != 1 {
		t.Fatalf("no rollout: want the header alone, got %d lines:\n%s", n, r.stdout)
	}

	now := time.Now()
	for i, tc := range []struct {
		name   string
		status api.RolloutStatus
	}{
		{"v1", api.RolloutStatus{Phase: api.RolloutSucceeded, Nodes: []api.NodeProgress{{Name: "w-1", Phase: api.NodeDone}}}},
		{"v2", api.RolloutStatus{Phase: api.RolloutHalted, HaltedNode: "w-2", HaltedReason: "generation 4 failed",
			Nodes: []api.NodeProgress{{Name: "w-1", Phase: api.NodeDone}, {Name: "w-2", Phase: api.NodeRollFailed}}}},
		{"v3", api.RolloutStatus{Phase: api.RolloutRunning, Current: []string{"cp-1"},
			Nodes: []api.NodeProgress{{Name: "w-1", Phase: api.NodeDone}, {Name: "cp-1", Phase: api.NodeApplying}, {Name: "cp-2"}}}},
	} {
		ro := api.NewRollout(tc.name)
		ro.Metadata.CreatedAt = now.Add(time.Duration(i-3) * time.Hour)
		ro.Status = tc.status
		if err := st.Put(ctx, store.RolloutKey(tc.name), ro); err != nil {
			t.Fatal(err)
		}
	}
	r = run(t, eps, "get", "rollouts")
	r.want(t, ExitOK, nil, nil)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], "v3") || !strings.HasPrefix(lines[3], "v1") {
		t.Fatalf("want a header and v3, v2, v1 newest first:\n%s", r.stdout)
	}
	rows := rowsByName(r.stdout)
	for name, want := range map[string][]string{
		"v1": {"Succeeded", "1/1", "-", "3h"},
		"v2": {"Halted", "1/2", "-", "2h", "halted", "at", "w-2:", "generation", "4", "failed"},
		"v3": {"Running", "1/3", "cp-1", "60m"},
	} {
		got := rows[name]
		if len(got) < 1+len(want) {
			t.Fatalf("row %s = %q, want %q after the name", name, got, want)
		}
		for i, w := range want {
			if got[1+i] != w {
				t.Errorf("row %s field %d = %q, want %q (row %q)", name, 1+i, got[1+i], w, got)
			}
		}
	}
	r = run(t, eps, "get", "rollout", "-o", "json")
	r.want(t, ExitOK, nil, nil)
	var objs []api.Rollout
	if err := json.Unmarshal([]byte(r.stdout), &objs); err != nil || len(objs) != 3 || objs[0].Metadata.Name != "v3" {
		t.Fatalf("-o json: %v %+v", err, objs)
	}
}
