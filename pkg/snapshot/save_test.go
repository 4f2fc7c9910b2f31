package snapshot_test

import (
	"context"
	"errors"
	"testing"

	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/snapshot"
)

func TestSaveTakesFromAFollowerIntoTheStore(t *testing.T) {
	c := etcdtest.Start(t, 3)
	cli := c.Client(t)
	ctx := context.Background()
	if _, err := cli.Put(ctx, "/a", "1"); err != nil {
		t.Fatal(err)
	}
	admin := etcdadmin.New(cli, etcdtest.CallBudget)
	defer admin.Close()
	ms, err := admin.Statuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	src, err := snapshot.PickSource(ms)
	if err != nil {
		t.Fatalf("PickSource: %v", err)
	}
	for _, m := range ms {
		if m.ID == src.ID && m.Leader == m.ID {
			t.Fatalf("PickSource chose the leader %s while followers were healthy", src.Name)
		}
	}
	st, err := snapshot.NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := snapshot.Save(ctx, src, etcdclient.TLSOf(cli), st, snapshot.TakeOptions{Dir: t.TempDir(), Reason: snapshot.ReasonOnDemand})
	if err != nil {
		t.Fatalf("Save: %v", err)
	}
	// The follower is synced first: the put acknowledged just before is in.
	if m.MemberName != src.Name || m.MemberID != src.ID || m.TotalKeys != 1 || m.Unsynced != "" {
		t.Fatalf("Save meta = %+v, want member %s with 1 key", m, src.Name)
	}
	list, err := st.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != m.Name {
		t.Fatalf("List = %v, %v; want the one snapshot", list, err)
	}
}

func TestPickSourceNeedsAHealthyVoter(t *testing.T) {
	ms := []etcdadmin.MemberStatus{
		{ID: 1, Name: "a", Reachable: false, Err: "deadline exceeded", ClientURLs: []string{"https://a"}},
		{ID: 2, Name: "b", Reachable: true, Learner: true, ClientURLs: []string{"https://b"}},
		{ID: 3, Name: "c", Reachable: true, Errors: []string{"NOSPACE"}, ClientURLs: []string{"https://c"}},
	}
	if _, err := snapshot.PickSource(ms); !errors.Is(err, snapshot.ErrNoHealthyMember) {
		t.Fatalf("PickSource: %v, want ErrNoHealthyMember", err)
	}
	ms = append(ms, etcdadmin.MemberStatus{ID: 4, Name: "d", Leader: 4, Reachable: true, ClientURLs: []string{"https://d"}})
	if s, err := snapshot.PickSource(ms); err != nil || s.Name != "d" {
		t.Fatalf("PickSource = %v, %v; want the leader d, the one healthy voter", s, err)
	}
	// Another node's member before the taker's own, even the leader.
	ms = append(ms, etcdadmin.MemberStatus{ID: 5, Name: "e", Leader: 4, Reachable: true, AppliedIndex: 9, ClientURLs: []string{"https://e"}})
	if s, err := snapshot.PickSource(ms, "e"); err != nil || s.Name != "d" {
		t.Fatalf("PickSource avoiding e = %v, %v; want d", s, err)
	}
	if s, err := snapshot.PickSource(ms); err != nil || s.Name != "e" {
		t.Fatalf("PickSource = %v, %v; want the follower e", s, err)
	}
}
