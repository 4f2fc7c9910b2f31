package testwait

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/homystack/nico/pkg/etcdtest"
)

// value is a KeyCond for key holding want.
func value(want string) KeyCond {
	return func(kv *mvccpb.KeyValue) (bool, string) {
		if kv == nil {
			return false, "absent"
		}
		return string(kv.Value) == want, fmt.Sprintf("value %q", kv.Value)
	}
}

// TestKeyFollowsTheWatch: Key sees the value already stored, later
// writes and a delete, without polling.
func TestKeyFollowsTheWatch(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	cli := cl.Client(t)
	if _, err := cli.Put(t.Context(), "k", "1"); err != nil {
		t.Fatal(err)
	}
	Key(t, cli, "k", 10*time.Second, "k at 1", value("1"))
	done := make(chan error, 1)
	go func() { done <- KeyUntil(t.Context(), cli, "k", 30*time.Second, value("3")) }()
	for _, v := range []string{"2", "3"} {
		if _, err := cli.Put(t.Context(), "k", v); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	go func() {
		done <- KeyUntil(t.Context(), cli, "k", 30*time.Second, func(kv *mvccpb.KeyValue) (bool, string) { return kv == nil, "present" })
	}()
	if _, err := cli.Delete(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestKeyFailsWithTheLastReasonAtTheDeadline: a change that does not make
// the condition hold is the reason reported at the deadline.
func TestKeyFailsWithTheLastReasonAtTheDeadline(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	cli := cl.Client(t)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- KeyUntil(t.Context(), cli, "k", 2*time.Second, value("never")) }()
	if _, err := cli.Put(t.Context(), "k", "other"); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if !errors.Is(err, ErrDeadline) {
		t.Fatalf("KeyUntil = %v, want ErrDeadline", err)
	}
	// The put may land before the first read or on the watch; either way
	// it is the last state seen.
	if !strings.Contains(err.Error(), `last: value "other"`) {
		t.Fatalf("KeyUntil = %q, want the last reason", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("KeyUntil returned after %s, its deadline was 2s", d)
	}
}
