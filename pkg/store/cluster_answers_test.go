package store

import (
	"context"
	"testing"

	"github.com/homystack/nico/pkg/etcdtest"
)

// TestAnswers: a running cluster answers; a probe whose context has
// ended does not.
func TestAnswers(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := etcdtest.NewClient(t, c.Endpoints()...)
	if err := Answers(ctx(t), cli); err != nil {
		t.Fatalf("running cluster: %v", err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Answers(done, cli); err == nil {
		t.Fatal("ended context: the cluster answered")
	}
}
