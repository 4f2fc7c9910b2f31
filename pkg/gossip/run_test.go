package gossip

import (
	"testing"
	"time"
)

// TestJoinBackoff: the k-th delay between failed joins lies in (d/2, d]
// for d = probe*2^k capped at 30 probes, as before the move to
// cenkalti/backoff, and Reset starts over.
func TestJoinBackoff(t *testing.T) {
	const probe = 200 * time.Millisecond
	const slack = time.Microsecond // float rounding
	b := joinBackoff(probe)
	for round := 0; round < 100; round++ {
		b.Reset()
		d := probe
		for k := 0; k < 10; k++ {
			got := b.NextBackOff()
			if got < d/2-slack || got > d+slack {
				t.Fatalf("round %d: delay %d = %v, want in (%v, %v]", round, k, got, d/2, d)
			}
			d = min(2*d, 30*probe)
		}
	}
}
