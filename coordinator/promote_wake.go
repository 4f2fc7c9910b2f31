package coordinator

import (
	"context"
	"sync"
)

// keyWakes watches key from now on and sends on the returned channel
// after each change (a pending send absorbs the next ones) until stop,
// which waits for the watch to end. The promotion of a learner watches
// its node: the agent reports there, at once, that its member serves,
// which etcd does only once the learner has caught up, so Promote tries
// again then instead of at its next tick (etcdadmin.TryAgainOn).
func (d membershipDeps) keyWakes(ctx context.Context, key string) (wakes <-chan struct{}, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for resp := range d.st.Watch(ctx, key, 0) {
			if len(resp.Events) == 0 {
				continue
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	})
	return ch, func() { cancel(); wg.Wait() }
}
