package systemd

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// quorumSampler samples etcd's voters every interval: a voter is healthy
// when its client URL answers a status request (one of two, 2 s each)
// with a leader and no error: on a connection kept to it (a new
// connection's TLS handshake on a loaded machine is no member's fault),
// then on a new one. A sample with fewer healthy voters than
// quorum is a breach; one with fewer healthy than all shows the sampler
// can see a member down.
type quorumSampler struct {
	cli      *clientv3.Client                       // for the member list
	dial     func(endpoint string) *clientv3.Client // a client of one member
	interval time.Duration
	conns    map[string]*clientv3.Client

	mu       sync.Mutex
	samples  int
	degraded int            // samples with a voter down
	breaches []string       // samples below quorum
	least    int            // fewest healthy voters seen
	downs    map[string]int // samples that saw each voter down
}

func (q *quorumSampler) run(ctx context.Context) {
	q.mu.Lock()
	q.downs = map[string]int{}
	q.mu.Unlock()
	for ctx.Err() == nil {
		healthy, voters, down, err := q.sample(ctx)
		if ctx.Err() != nil {
			// The sampling ended mid-sample: its calls were canceled,
			// which says nothing of the members.
			return
		}
		q.mu.Lock()
		switch {
		case err != nil:
			// No member list: no member answered at all.
			q.breaches = append(q.breaches, fmt.Sprintf("%s: no member list: %v", time.Now().Format("15:04:05.000"), err))
		case err == nil:
			q.samples++
			if q.samples == 1 || healthy < q.least {
				q.least = healthy
			}
			if healthy < voters {
				q.degraded++
				for _, d := range down {
					name, _, _ := strings.Cut(d, ":")
					q.downs[name]++
				}
			}
			if healthy < voters/2+1 {
				q.breaches = append(q.breaches, fmt.Sprintf("%s: %d of %d voters healthy, quorum %d; down: %s", time.Now().Format("15:04:05.000"), healthy, voters, voters/2+1, strings.Join(down, "; ")))
			}
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(q.interval):
		}
	}
}

// sample counts the voters and the healthy ones, and says why each other
// one is not.
func (q *quorumSampler) sample(ctx context.Context) (healthy, voters int, down []string, err error) {
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
		return 0, 0, nil, err
	}
	if q.conns == nil {
		q.conns = map[string]*clientv3.Client{}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range ml.Members {
		if m.IsLearner || len(m.ClientURLs) == 0 {
			if !m.IsLearner {
				voters++ // a voter not started yet: down
				down = append(down, fmt.Sprintf("%x not started", m.ID))
			}
			continue
		}
		voters++
		ep := m.ClientURLs[0]
		mu.Lock()
		conn, ok := q.conns[ep]
		if !ok {
			conn = q.dial(ep)
			q.conns[ep] = conn
		}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			// On the kept connection, then, should that fail, on a new
			// one: a kept connection to a member that restarted may
			// wait out gRPC's reconnect backoff after the member is back.
			// A member that refuses connections fails both at once.
			var why string
			for try := range 2 {
				if try == 1 {
					fresh := q.dial(ep)
					mu.Lock()
					q.conns[ep] = fresh
					mu.Unlock()
					conn.Close()
					conn = fresh
				}
				sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				st, err := pb.NewMaintenanceClient(conn.ActiveConnection()).Status(sctx, &pb.StatusRequest{})
				cancel()
				switch {
				case err != nil:
					why = err.Error()
				case st.Header == nil || st.Leader == 0:
					why = "no leader"
				case len(st.Errors) > 0:
					why = strings.Join(st.Errors, ", ")
				default:
					mu.Lock()
					healthy++
					mu.Unlock()
					return
				}
			}
			mu.Lock()
			down = append(down, m.Name+": "+why)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return healthy, voters, down, nil
}

// report returns the number of samples, of those with a voter down (and
// how many saw each voter down), the fewest healthy voters seen and the
// breaches.
func (q *quorumSampler) report() (samples, degraded int, downs map[string]int, least int, breaches []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.samples, q.degraded, maps.Clone(q.downs), q.least, append([]string(nil), q.breaches...)
}
