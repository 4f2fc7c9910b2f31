package faults

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The workload's keys: a few registers, and a record of every write the
// cluster acknowledged (written in the same transaction as the register).
const (
	regPrefix = "/faults/reg/"
	ackPrefix = "/faults/ack/"
	nKeys     = 3
	opTimeout = 2 * time.Second
)

// kvInput is one client call: a read (put false) or a write of value.
type kvInput struct {
	put   bool
	key   string
	value string
}

// kvOutput is what a read returned ("" for absent).
type kvOutput struct{ value string }

// kvModel is a set of independent registers, partitioned by key.
var kvModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(kvInput).key
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() interface{} { return "" },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		in := input.(kvInput)
		if in.put {
			return true, in.value
		}
		return output.(kvOutput).value == state.(string), state
	},
	DescribeOperation: func(input, output interface{}) string {
		in := input.(kvInput)
		if in.put {
			return fmt.Sprintf("put(%s, %s)", in.key, in.value)
		}
		return fmt.Sprintf("get(%s) -> %q", in.key, output.(kvOutput).value)
	},
}

// history is the operations of every client of one workload.
type history struct {
	mu     sync.Mutex
	start  time.Time
	ops    []porcupine.Operation
	acked  []string      // values whose write was acknowledged
	stall  time.Duration // longest time any client went without a success
	failed int           // calls that failed or timed out
}

func (h *history) add(op porcupine.Operation, ok bool, value string) {
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

func (h *history) ackedCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.acked)
}

func (h *history) noteStall(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stall = max(h.stall, d)
}

// runWorkload runs clients goroutines of reads and writes on nKeys keys
// until ctx ends; each client has its own connection to every endpoint.
func runWorkload(ctx context.Context, newClient func() *clientv3.Client, clients int, seed uint64) (*history, func() *history) {
	h := &history{start: time.Now()}
	var wg sync.WaitGroup
	for id := range clients {
		cli := newClient()
		wg.Add(1)
		go func() {
			defer wg.Done()
			runClient(ctx, h, cli, id, rand.New(rand.NewPCG(seed, uint64(id))))
		}()
	}
	return h, func() *history { wg.Wait(); return h }
}

func runClient(ctx context.Context, h *history, cli *clientv3.Client, id int, rng *rand.Rand) {
	lastOK := time.Now()
	for n := 0; ctx.Err() == nil; n++ {
		key := fmt.Sprintf("%s%d", regPrefix, rng.IntN(nKeys))
		in := kvInput{key: key}
		if rng.IntN(2) == 0 {
			in.put, in.value = true, fmt.Sprintf("c%d-%d", id, n)
		}
		call := time.Now()
		cctx, cancel := context.WithTimeout(ctx, opTimeout)
		var out kvOutput
		var err error
		if in.put {
			_, err = cli.Txn(cctx).Then(clientv3.OpPut(key, in.value), clientv3.OpPut(ackPrefix+in.value, key)).Commit()
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
		if ctx.Err() != nil {
			h.noteStall(time.Since(lastOK))
		}
	}
}

// verdict is the outcome of the checks of one history.
type verdict struct {
	Linearizable porcupine.CheckResult
	Lost         []string // acknowledged writes missing at the end
	Ops, Failed  int
	Stall        time.Duration
}

// check checks h for linearizability (writing porcupine's visualisation
// to vizPath when it is not) and that every acknowledged write is present.
func check(t *testing.T, cli *clientv3.Client, h *history, vizPath string) verdict {
	t.Helper()
	v := verdict{Ops: len(h.ops), Failed: h.failed, Stall: h.stall}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, ackPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("read the acknowledged writes: %v", err)
	}
	have := map[string]bool{}
	for _, kv := range resp.Kvs {
		have[string(kv.Key)[len(ackPrefix):]] = true
	}
	for _, a := range h.acked {
		if !have[a] {
			v.Lost = append(v.Lost, a)
		}
	}
	res, info := porcupine.CheckOperationsVerbose(kvModel, settled(h.ops, have), time.Minute)
	v.Linearizable = res
	if res != porcupine.Ok {
		if err := porcupine.VisualizePath(kvModel, info, vizPath); err != nil {
			t.Logf("write the visualisation: %v", err)
		} else {
			t.Logf("history not linearizable (%s): visualisation in %s", res, vizPath)
		}
	}
	return v
}

// settled drops the writes of unknown outcome that did not take effect:
// a write puts its value's ack key in the same transaction, so one whose
// ack key is absent once the clients stopped never took effect (had any
// read seen it, it would have been applied before that read, and before
// the final read too). Under NOSPACE etcd refuses every write at once,
// and each refusal is such an open write; kept open, hundreds of them
// make the linearizability search explode.
func settled(ops []porcupine.Operation, have map[string]bool) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		if in, ok := op.Input.(kvInput); ok && in.put && op.Return == math.MaxInt64 && !have[in.value] {
			continue
		}
		out = append(out, op)
	}
	return out
}
