package linearkv

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The workload's keys: a few registers, and a record of every write the
// cluster acknowledged (written in the same transaction as the register).
const (
	RegPrefix = "/linearkv/reg/"
	AckPrefix = "/linearkv/ack/"
	nKeys     = 3
	opTimeout = 2 * time.Second
)

// History is the operations of every client of one workload.
type History struct {
	mu     sync.Mutex
	start  time.Time
	ops    []porcupine.Operation
	acked  []string      // values whose write was acknowledged
	stall  time.Duration // longest time any client went without a success
	failed int           // calls that failed or timed out
}

func (h *History) add(op porcupine.Operation, ok bool, value string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
	if ok && value != "" {
		h.acked = append(h.acked, value)
	}
	if !ok {
		h.failed++
	}
}

// Acked is how many writes the cluster has acknowledged so far.
func (h *History) Acked() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.acked)
}

func (h *History) noteStall(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stall = max(h.stall, d)
}

// Run runs clients goroutines of reads and writes on nKeys keys
// until ctx ends, each pausing pause after each call (0: none); each
// client has its own connection to every endpoint.
func Run(ctx context.Context, newClient func() *clientv3.Client, clients int, seed uint64, pause time.Duration) (*History, func() *History) {
	h := &History{start: time.Now()}
	var wg sync.WaitGroup
	for id := range clients {
		cli := newClient()
		wg.Add(1)
		go func() {
			defer wg.Done()
			runClient(ctx, h, cli, id, rand.New(rand.NewPCG(seed, uint64(id))), pause)
		}()
	}
	return h, func() *History { wg.Wait(); return h }
}

func runClient(ctx context.Context, h *History, cli *clientv3.Client, id int, rng *rand.Rand, pause time.Duration) {
	lastOK := time.Now()
	for n := 0; ctx.Err() == nil; n++ {
		key := fmt.Sprintf("%s%d", RegPrefix, rng.IntN(nKeys))
		in := Input{key: key}
		if rng.IntN(2) == 0 {
			in.put, in.value = true, fmt.Sprintf("c%d-%d", id, n)
		}
		call := time.Now()
		cctx, cancel := context.WithTimeout(ctx, opTimeout)
		var out Output
		var err error
		if in.put {
			_, err = cli.Txn(cctx).Then(clientv3.OpPut(key, in.value), clientv3.OpPut(AckPrefix+in.value, key)).Commit()
		} else {
			var resp *clientv3.GetResponse
			if resp, err = cli.Get(cctx, key); err == nil && len(resp.Kvs) > 0 {
				out.value = string(resp.Kvs[0].Value)
			}
		}
		cancel()
		ret := time.Now()
		op := porcupine.Operation{ClientId: id, Input: in, Call: int64(call.Sub(h.start)), Output: out, Return: int64(ret.Sub(h.start))}
		switch {
		case err == nil:
			h.noteStall(ret.Sub(lastOK))
			lastOK = ret
			h.add(op, true, in.value)
		case in.put:
			// The write may or may not have taken effect: it returns
			// never, so porcupine may place it anywhere after its call.
			op.Return = math.MaxInt64
			h.add(op, false, "")
			id += 1000 // a new client id: the unknown call stays open
		default:
			h.mu.Lock()
			h.failed++ // a failed read has no effect: left out
			h.mu.Unlock()
		}
		if pause > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
		if ctx.Err() != nil {
			h.noteStall(time.Since(lastOK))
		}
	}
}
