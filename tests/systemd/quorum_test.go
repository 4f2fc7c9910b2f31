package systemd

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// quorumSampler samples etcd's voters every interval: a voter is healthy
// when its client URL answers a status request (one of two, 1.5 s each)
// with a leader and no error. A sample with fewer healthy voters than
// quorum is a breach; one with fewer healthy than all shows the sampler
// can see a member down.
type quorumSampler struct {
	cli      *clientv3.Client
	interval time.Duration

	mu       sync.Mutex
	samples  int
	degraded int      // samples with a voter down
	breaches []string // samples below quorum
	least    int      // fewest healthy voters seen
}

func (q *quorumSampler) run(ctx context.Context) {
	for ctx.Err() == nil {
		healthy, voters, err := q.sample(ctx)
		q.mu.Lock()
		switch {
		case err != nil && ctx.Err() == nil:
			// No member list: no member answered at all.
			q.breaches = append(q.breaches, fmt.Sprintf("%s: no member list: %v", time.Now().Format("15:04:05.000"), err))
		case err == nil:
			q.samples++
			if q.samples == 1 || healthy < q.least {
				q.least = healthy
			}
			if healthy < voters {
				q.degraded++
			}
			if healthy < voters/2+1 {
				q.breaches = append(q.breaches, fmt.Sprintf("%s: %d of %d voters healthy, quorum %d", time.Now().Format("15:04:05.000"), healthy, voters, voters/2+1))
			}
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(q.interval):
		}
	}
}

// sample counts the voters and the healthy ones.
func (q *quorumSampler) sample(ctx context.Context) (healthy, voters int, err error) {
	var ml *clientv3.MemberListResponse
	for range 2 {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ml, err = q.cli.MemberList(lctx)
		cancel()
		if err == nil {
			break
		}
	}
	if err != nil {
		return 0, 0, err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range ml.Members {
		if m.IsLearner || len(m.ClientURLs) == 0 {
			if !m.IsLearner {
				voters++ // a voter not started yet: down
			}
			continue
		}
		voters++
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Twice, so that one slow answer on a loaded machine is
			// not taken for a member down.
			for range 2 {
				sctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
				st, err := q.cli.Status(sctx, m.ClientURLs[0])
				cancel()
				if err == nil && st.Leader != 0 && len(st.Errors) == 0 {
					mu.Lock()
					healthy++
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return healthy, voters, nil
}

// report returns the number of samples, of those with a voter down, the
// fewest healthy voters seen and the breaches.
func (q *quorumSampler) report() (samples, degraded, least int, breaches []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.samples, q.degraded, q.least, append([]string(nil), q.breaches...)
}
