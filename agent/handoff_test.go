package agent

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
)

// TestHandOffLeadershipBeforeStop: an agent whose member leads etcd moves
// leadership to another voter before it stops the member (here nothing is
// stopped, so only nico's move can explain the change); an agent whose
// member follows leaves leadership alone.
func TestHandOffLeadershipBeforeStop(t *testing.T) {
	cl := etcdtest.Start(t, 3)
	cli := cl.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leaderID, err := etcdtest.WaitLeader(ctx, cli, cl.Members[0].ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	agentOn := func(m *etcdtest.Member) *Agent {
		a := New(Config{Name: m.Name, PeerURL: m.PeerURL, ClientURL: m.ClientURL}, nil, nil, slog.New(slog.DiscardHandler))
		a.use(cli, nil)
		return a
	}
	var leader, follower *etcdtest.Member
	for _, m := range cl.Members {
		if uint64(m.Etcd.Server.MemberID()) == leaderID {
			leader = m
		} else {
			follower = m
		}
	}
	agentOn(follower).member.handOffLeadership(ctx)
	if now, _ := etcdtest.WaitLeader(ctx, cli, leader.ClientURL); now != leaderID {
		t.Fatalf("a follower's agent moved leadership from %x to %x", leaderID, now)
	}
	agentOn(leader).member.handOffLeadership(ctx)
	now, err := etcdtest.WaitLeader(ctx, cli, follower.ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	if now == leaderID {
		t.Fatalf("leadership stayed with %x", leaderID)
	}
}
