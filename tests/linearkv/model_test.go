package linearkv

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/anishathalye/porcupine"
)

// TestKVModel: the checker accepts a history a register allows, rejects a
// stale read, and lets a write of unknown outcome (never returned) take
// effect or not.
func TestKVModel(t *testing.T) {
	put := func(c int, v string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: Input{put: true, key: "k", value: v}, Output: Output{}, Call: call, Return: ret}
	}
	get := func(c int, v string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: Input{key: "k"}, Output: Output{value: v}, Call: call, Return: ret}
	}
	tests := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"sequential", []porcupine.Operation{put(0, "a", 0, 1), get(1, "a", 2, 3)}, porcupine.Ok},
		{"concurrent read sees either", []porcupine.Operation{put(0, "a", 0, 1), put(0, "b", 2, 5), get(1, "a", 3, 4)}, porcupine.Ok},
		{"stale read", []porcupine.Operation{put(0, "a", 0, 1), put(0, "b", 2, 3), get(1, "a", 4, 5)}, porcupine.Illegal},
		{"unknown write took effect", []porcupine.Operation{put(0, "a", 0, math.MaxInt64), get(1, "a", 4, 5)}, porcupine.Ok},
		{"unknown write did not", []porcupine.Operation{put(0, "a", 0, math.MaxInt64), get(1, "", 4, 5)}, porcupine.Ok},
		{"value never written", []porcupine.Operation{put(0, "a", 0, 1), get(1, "z", 4, 5)}, porcupine.Illegal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, info := porcupine.CheckOperationsVerbose(Model, tt.ops, 0)
			if got != tt.want {
				t.Fatalf("check = %s, want %s", got, tt.want)
			}
			if got == porcupine.Illegal {
				// What a failed scenario writes next to the report.
				path := filepath.Join(t.TempDir(), "history.html")
				if err := porcupine.VisualizePath(Model, info, path); err != nil {
					t.Fatal(err)
				}
				if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
					t.Fatalf("no visualisation at %s: %v", path, err)
				}
			}
		})
	}
}

// TestSettledDropsWritesThatNeverTookEffect: an unknown write whose ack
// key is absent is dropped, one whose ack is present or that returned is
// kept.
func TestSettledDropsWritesThatNeverTookEffect(t *testing.T) {
	op := func(v string, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: Input{put: true, key: "k", value: v}, Return: ret}
	}
	got := Settled([]porcupine.Operation{op("refused", math.MaxInt64), op("applied", math.MaxInt64), op("acked", 5),
		{Input: Input{key: "k"}, Return: 6}}, map[string]bool{"applied": true, "acked": true})
	var kept []string
	for _, o := range got {
		kept = append(kept, o.Input.(Input).value)
	}
	if len(got) != 3 || kept[0] != "applied" || kept[1] != "acked" || kept[2] != "" {
		t.Fatalf("kept %q", kept)
	}
}
