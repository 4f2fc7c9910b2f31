package ctl

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
)

// TestGetMembersLearnerProgress: a learner's row shows its progress from
// the raft indexes and the ETA the leader's EtcdCluster status holds; a
// voter's shows neither.
func TestGetMembersLearnerProgress(t *testing.T) {
	c := etcdtest.Start(t, 1)
	st := newStore(t, c)
	seed(t, c, st)
	ctx := testCtx(t)
	peer := fmt.Sprintf("https://127.0.0.1:%d", etcdtest.FreePort(t))
	resp, err := st.Client().MemberAddAsLearner(ctx, []string{peer})
	if err != nil {
		t.Fatal(err)
	}
	id := api.MemberID(resp.Member.ID)
	ec := api.NewEtcdCluster()
	ec.Status.Members = []api.EtcdMemberStatus{{Name: "cp-2", ID: id, Role: api.RoleLearner, ETA: api.Duration(42 * time.Second)}}
	if err := st.Put(ctx, store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	r := run(t, c.Endpoints(), "get", "members")
	r.want(t, 0, []string{"PROGRESS", "ETA"}, nil)
	var learner, voter string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n")[1:] {
		if strings.Contains(l, peer) {
			learner = l
		} else {
			voter = l
		}
	}
	if !strings.Contains(learner, "0%") || !strings.Contains(learner, "42s") {
		t.Errorf("learner row %q lacks its progress and ETA", learner)
	}
	if strings.Contains(voter, "%") || strings.Contains(voter, "42s") {
		t.Errorf("voter row %q shows a progress", voter)
	}
	var views []MemberView
	r = run(t, c.Endpoints(), "get", "members", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &views); err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		if v.ID == id && v.ETA != api.Duration(42*time.Second) {
			t.Errorf("learner view %+v", v)
		}
	}
}
