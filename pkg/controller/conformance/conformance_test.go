package conformance_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/controller/conformance"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"))
}

// tally writes the number of keys under in/ to out/count, when it changed.
type tally struct {
	st *store.Store
	// stamp makes it write every time (a controller that breaks the rule).
	stamp bool
}

func (c *tally) Name() string      { return "tally" }
func (c *tally) Watches() []string { return []string{"in/"} }

func (c *tally) Reconcile(ctx context.Context) error {
	in, err := c.st.Client().Get(ctx, "in/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	want := strconv.FormatInt(in.Count, 10)
	if c.stamp {
		want += "@" + time.Now().String()
	}
	out, err := c.st.Client().Get(ctx, "out/count")
	if err != nil {
		return err
	}
	if len(out.Kvs) == 1 && string(out.Kvs[0].Value) == want {
		return nil
	}
	_, err = c.st.Client().Put(ctx, "out/count", want)
	return err
}

func newStore(t *testing.T) *store.Store {
	cl := etcdtest.StartWith(t, etcdtest.Options{Members: 1})
	st, err := store.New(etcdtest.NewClient(t, cl.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Client().Put(context.Background(), "in/a", "1"); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestConformingController(t *testing.T) {
	st := newStore(t)
	conformance.Run(t, conformance.Case{Store: st, New: func(*testing.T) controller.Controller { return &tally{st: st} }})
}

func TestChecksCatchWhatBreaksTheContract(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	if err := conformance.IdempotentAtRest(ctx, st, &tally{st: st, stamp: true}); err == nil {
		t.Error("IdempotentAtRest passed a controller that writes on every reconcile")
	}
	whole := &controller.Func{ControllerName: "whole", Prefixes: []string{""}, Do: func(context.Context) error { return nil }}
	if err := conformance.Declaration(ctx, st, whole); err == nil {
		t.Error("Declaration passed a controller that watches the whole keyspace")
	}
	abs := &controller.Func{ControllerName: "abs", Prefixes: []string{store.DefaultPrefix + store.NodesDir}, Do: func(context.Context) error { return nil }}
	if err := conformance.Declaration(ctx, st, abs); err == nil {
		t.Error("Declaration passed an absolute prefix")
	}
	none := &controller.Func{ControllerName: "none", Do: func(context.Context) error { return nil }}
	if err := conformance.Declaration(ctx, st, none); err == nil {
		t.Error("Declaration passed a controller with neither watches nor a tick")
	}
	tickOnly := &controller.Func{ControllerName: "tick-only", Resync: time.Minute, Do: func(context.Context) error { return nil }}
	if err := conformance.Declaration(ctx, st, tickOnly); err != nil {
		t.Errorf("Declaration refused a tick-only controller: %v", err)
	}
	failing := &controller.Func{ControllerName: "failing", Prefixes: []string{"in/"}, Do: func(context.Context) error { return errors.New("no") }}
	if err := conformance.RunsUnderTheRuntime(ctx, st, failing); err == nil {
		t.Error("RunsUnderTheRuntime passed a controller whose reconcile fails")
	}
}
