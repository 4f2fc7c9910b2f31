package fleetkit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Fill puts n keys through cli from workers goroutines, each put bounded
// by 10 s; kv names the i-th key and its value. It returns the first error.
func Fill(ctx context.Context, cli *clientv3.Client, workers, n int, kv func(i int) (key, value string)) error {
	var next atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				k, v := kv(i)
				pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := cli.Put(pctx, k, v)
				cancel()
				if err != nil {
					errs <- fmt.Errorf("fill %s: %w", k, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
