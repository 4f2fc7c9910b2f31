package etcdtest

import (
	"context"
	"testing"
	"time"
)

func TestStartThreeMembers(t *testing.T) {
	c := Start(t, 3)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Members) != 3 {
		t.Fatalf("members = %d, want 3", len(resp.Members))
	}
	if _, err := WaitLeader(ctx, cli, c.Members[0].ClientURL); err != nil {
		t.Fatal(err)
	}
}
