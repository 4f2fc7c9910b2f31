package restore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
)

// TestWaitListed: a rejoining member starts only once every voter lists
// its learner add in its own view of the membership; a voter that never
// does fails the wait, naming it.
func TestWaitListed(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	cli := etcdtest.NewClient(t, cl.Endpoints()...)
	f := &LocalFleet{ClientTLS: etcdtest.ClientTLS(t, pki.RootIdentity)}
	ctx := t.Context()
	resp, err := cli.MemberAddAsLearner(ctx, []string{"http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.waitListed(ctx, resp.Members, resp.Member.ID); err != nil {
		t.Fatalf("the voter lists the learner it added: %v", err)
	}
	var voter string
	for _, m := range resp.Members {
		if !m.IsLearner {
			voter = m.Name
		}
	}
	if voter == "" {
		t.Fatalf("no named voter in %v", resp.Members)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = f.waitListed(short, resp.Members, resp.Member.ID+1)
	if err == nil || !strings.Contains(err.Error(), "does not list the learner") || !strings.Contains(err.Error(), "member "+voter+" ") {
		t.Fatalf("a learner no voter lists: %v; want an error naming the voter", err)
	}
}
