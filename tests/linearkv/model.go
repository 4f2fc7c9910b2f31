package linearkv

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// Input is one client call: a read (put false) or a write of value.
type Input struct {
	put   bool
	key   string
	value string
}

// Output is what a read returned ("" for absent).
type Output struct{ value string }

// Model is a set of independent registers, partitioned by key.
var Model = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(Input).key
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
		in := input.(Input)
		if in.put {
			return true, in.value
		}
		return output.(Output).value == state.(string), state
	},
	DescribeOperation: func(input, output interface{}) string {
		in := input.(Input)
		if in.put {
			return fmt.Sprintf("put(%s, %s)", in.key, in.value)
		}
		return fmt.Sprintf("get(%s) -> %q", in.key, output.(Output).value)
	},
}
