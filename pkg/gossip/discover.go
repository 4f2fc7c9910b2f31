package gossip

import (
	"context"
	"time"
)

// NodeWatcher is the part of a mesh member (*Mesh) that discovery reads.
type NodeWatcher interface {
	Nodes() []NodeState
	Changed() <-chan struct{}
}

// Discovery says how AwaitEtcdEndpoints waits.
type Discovery struct {
	// Waiting, when set, is called once, the first time the mesh names no
	// voter (to log it).
	Waiting func()
	// Fallback, when set, fires when endpoints from elsewhere may do
	// (after a grace period); Fallback's value is then asked for them.
	Fallback <-chan time.Time
	// Use gives the endpoints to use when Fallback fires; none: keep
	// waiting for the mesh.
	Use func() []string
}

// AwaitEtcdEndpoints waits until the mesh names the etcd client URLs of
// voters (EtcdEndpoints) and returns them, or those d.Use gives once
// d.Fallback fires. It returns ctx's error when ctx ends first.
func AwaitEtcdEndpoints(ctx context.Context, w NodeWatcher, d Discovery) ([]string, error) {
	waited := false
	for {
		if eps := EtcdEndpoints(w.Nodes()); len(eps) > 0 {
			return eps, nil
		}
		if !waited && d.Waiting != nil {
			d.Waiting()
		}
		waited = true
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-w.Changed():
		case <-d.Fallback:
			if d.Use != nil {
				if eps := d.Use(); len(eps) > 0 {
					return eps, nil
				}
			}
		}
	}
}
