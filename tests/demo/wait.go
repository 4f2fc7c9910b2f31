package main

import (
	"context"
	"fmt"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// poll calls ok every 100ms, each call under a 2s timeout of its own (the
// client may try an endpoint that is not up yet), until it reports true or
// ctx ends; what names the condition in the error.
func poll(ctx context.Context, what string, ok func(context.Context) (bool, string)) error {
	last := ""
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		done, seen := ok(cctx)
		cancel()
		if done {
			return nil
		}
		if seen != "" {
			last = seen
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last seen: %s)", what, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitNodePhase waits until every named node's object is in phase want, so
// a table printed next agrees with the member table printed before it.
func (d *demo) waitNodePhase(ctx context.Context, want api.NodePhase, names ...string) error {
	return poll(ctx, fmt.Sprintf("nodes %v to be %s", names, want), func(ctx context.Context) (bool, string) {
		st, done, err := d.freshStore(ctx)
		if err != nil {
			return false, err.Error()
		}
		defer done()
		for _, name := range names {
			n := &api.Node{}
			if err := st.Get(ctx, store.NodeKey(name), n); err != nil {
				return false, name + ": " + err.Error()
			}
			if n.Status.Phase != want {
				return false, fmt.Sprintf("%s is %q", name, n.Status.Phase)
			}
		}
		return true, ""
	})
}

// waitHealthy waits until every member answers its status on its client URL.
func waitHealthy(ctx context.Context, cli *clientv3.Client) error {
	return poll(ctx, "every member to be healthy", func(ctx context.Context) (bool, string) {
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range resp.Members {
			if len(m.ClientURLs) == 0 {
				return false, m.Name + " has not started"
			}
			if _, err := cli.Status(ctx, m.ClientURLs[0]); err != nil {
				return false, m.Name + ": " + err.Error()
			}
		}
		return true, ""
	})
}

// waitRolloutPlanned waits until the coordinator leader has listed the
// nodes rollout name will roll, so its status starts with a real count.
func (d *demo) waitRolloutPlanned(ctx context.Context, name string) error {
	return poll(ctx, "rollout "+name+" to be planned", func(ctx context.Context) (bool, string) {
		st, done, err := d.freshStore(ctx)
		if err != nil {
			return false, err.Error()
		}
		defer done()
		r := &api.Rollout{}
		if err := st.Get(ctx, store.RolloutKey(name), r); err != nil {
			return false, err.Error()
		}
		return len(r.Status.Nodes) > 0, string(r.Status.Phase)
	})
}

// freshStore is a store on a client of its own, closed by done. The waits
// read through a new client each time: the demo's long-lived client was
// made before the agent turned etcd authentication on.
func (d *demo) freshStore(ctx context.Context) (*store.Store, func(), error) {
	cli, err := d.client(ctx)
	if err != nil {
		return nil, nil, err
	}
	st, err := store.New(cli, store.DefaultPrefix)
	if err != nil {
		cli.Close()
		return nil, nil, err
	}
	return st, func() { cli.Close() }, nil
}
