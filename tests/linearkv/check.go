package linearkv

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Verdict is the outcome of the checks of one history.
type Verdict struct {
	Linearizable porcupine.CheckResult
	Lost         []string // acknowledged writes missing at the end
	Ops, Failed  int
	Stall        time.Duration
}

// Check checks h for linearizability (writing porcupine's visualisation
// to vizPath when it is not) and that every acknowledged write is present.
func Check(t testing.TB, cli *clientv3.Client, h *History, vizPath string) Verdict {
	t.Helper()
	v := Verdict{Ops: len(h.ops), Failed: h.failed, Stall: h.stall}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, AckPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("read the acknowledged writes: %v", err)
	}
	have := map[string]bool{}
	for _, kv := range resp.Kvs {
		have[string(kv.Key)[len(AckPrefix):]] = true
	}
	for _, a := range h.acked {
		if !have[a] {
			v.Lost = append(v.Lost, a)
		}
	}
	res, info := porcupine.CheckOperationsVerbose(Model, Settled(h.ops, have), time.Minute)
	v.Linearizable = res
	if res != porcupine.Ok {
		if err := porcupine.VisualizePath(Model, info, vizPath); err != nil {
			t.Logf("write the visualisation: %v", err)
		} else {
			t.Logf("history not linearizable (%s): visualisation in %s", res, vizPath)
		}
	}
	return v
}

// Settled drops the writes of unknown outcome that did not take effect:
// a write puts its value's ack key in the same transaction, so one whose
// ack key is absent once the clients stopped never took effect (had any
// read seen it, it would have been applied before that read, and before
// the final read too). Under NOSPACE etcd refuses every write at once,
// and each refusal is such an open write; kept open, hundreds of them
// make the linearizability search explode.
func Settled(ops []porcupine.Operation, have map[string]bool) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		if in, ok := op.Input.(Input); ok && in.put && op.Return == math.MaxInt64 && !have[in.value] {
			continue
		}
		out = append(out, op)
	}
	return out
}
