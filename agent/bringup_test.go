package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/logging"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// TestBringUpPhasesChain: every phase needs only outputs an earlier phase
// makes, every output is made by exactly one phase, and the last phase
// makes the last output: the bring-up cannot wait on an output nothing
// makes, nor end before the node is ready.
func TestBringUpPhasesChain(t *testing.T) {
	madeBy := map[output]string{}
	names := map[string]bool{}
	for _, p := range bringUpPhases {
		if names[p.name] {
			t.Errorf("phase name %q given twice", p.name)
		}
		names[p.name] = true
		for _, in := range p.needs {
			if _, ok := madeBy[in]; !ok {
				t.Errorf("phase %s needs %s, which no phase before it makes", p.name, in)
			}
		}
		if by, ok := madeBy[p.makes]; ok {
			t.Errorf("output %s made by %s and %s", p.makes, by, p.name)
		}
		madeBy[p.makes] = p.name
	}
	for o := range numOutputs {
		if _, ok := madeBy[o]; !ok {
			t.Errorf("output %s is made by no phase", o)
		}
	}
	if last := bringUpPhases[len(bringUpPhases)-1]; last.makes != numOutputs-1 {
		t.Errorf("the last phase, %s, makes %s; want %s", last.name, last.makes, output(numOutputs-1))
	}
}

// TestBringUpTableMatchesThePhases: agent/controllers.go's table lists
// each phase with what it needs and makes, as bringUpPhases declares.
func TestBringUpTableMatchesThePhases(t *testing.T) {
	src, err := os.ReadFile("controllers.go")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for line := range strings.Lines(string(src)) {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "//"))
		if len(f) == 4 {
			rows[f[0]] = f[1:3]
		}
	}
	for _, p := range bringUpPhases {
		needs := "-"
		if len(p.needs) > 0 {
			var ns []string
			for _, n := range p.needs {
				ns = append(ns, n.String())
			}
			needs = strings.Join(ns, ",")
		}
		want := []string{needs, p.makes.String()}
		if got, ok := rows[p.name]; !ok || !slices.Equal(got, want) {
			t.Errorf("controllers.go's table: phase %s is %v; want needs and makes %v", p.name, got, want)
		}
	}
}

// phaseRecorder records the phases that ran to completion.
type phaseRecorder struct {
	mu  sync.Mutex
	ran []string
}

func (r *phaseRecorder) phase(name string, needs []output, makes output, do func() (bool, error)) bringUpPhase {
	return bringUpPhase{name: name, needs: needs, makes: makes, do: func(*bringUp, context.Context) (bool, error) {
		ok, err := do()
		if ok && err == nil {
			r.mu.Lock()
			r.ran = append(r.ran, name)
			r.mu.Unlock()
		}
		return ok, err
	}}
}

func (r *phaseRecorder) order() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ran)
}

func done() (bool, error) { return true, nil }

func testBringUp(t *testing.T, ctx context.Context, phases ...bringUpPhase) *bringUp {
	a := New(Config{Name: "w-1", Roles: []api.Role{api.RoleWorker}}, nil, quietNotifier{}, logging.Test(t))
	return &bringUp{a: a, outer: ctx, bg: &groups{rt: a.rt}, phases: phases}
}

// TestBringUpFollowsTheInputs: phases listed against the order of their
// inputs still run in that order, each once, and the bring-up ends when
// the last output is made.
func TestBringUpFollowsTheInputs(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var r phaseRecorder
	b := testBringUp(t, ctx,
		r.phase("third", []output{storeConnected}, identityMade, done),
		r.phase("second", []output{certsInPlace}, storeConnected, done),
		r.phase("first", nil, certsInPlace, done),
	)
	if err := b.run(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := r.order(), []string{"first", "second", "third"}; !slices.Equal(got, want) {
		t.Fatalf("phases ran %v; want %v", got, want)
	}
}

// TestBringUpEndsOnAPhaseError: a phase's error ends the bring-up with
// that error, and the phases after it never run.
func TestBringUpEndsOnAPhaseError(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	boom := errors.New("certificate refused")
	var r phaseRecorder
	var later bool
	b := testBringUp(t, ctx,
		r.phase("first", nil, certsInPlace, done),
		r.phase("second", []output{certsInPlace}, storeConnected, func() (bool, error) { return false, boom }),
		r.phase("third", []output{storeConnected}, identityMade, func() (bool, error) { later = true; return true, nil }),
	)
	if err := b.run(ctx); !errors.Is(err, boom) {
		t.Fatalf("bring-up returned %v; want %v", err, boom)
	}
	if later {
		t.Fatal("a phase after the failed one ran")
	}
	if b.complete() {
		t.Fatal("bring-up complete after a failed phase")
	}
}

// TestBringUpPollsAPhaseNotYetDone: a phase that has its inputs but
// cannot finish yet is reconciled again on its tick until it does.
func TestBringUpPollsAPhaseNotYetDone(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var r phaseRecorder
	tries := 0
	poll := r.phase("poll", []output{certsInPlace}, storeConnected, func() (bool, error) {
		tries++
		return tries == 3, nil
	})
	poll.tick = func(*Config) time.Duration { return 5 * time.Millisecond }
	b := testBringUp(t, ctx, r.phase("first", nil, certsInPlace, done), poll)
	if err := b.run(ctx); err != nil {
		t.Fatal(err)
	}
	if tries != 3 {
		t.Fatalf("the polled phase ran %d times; want 3", tries)
	}
}

// TestBringUpStopsWithItsContext: the end of ctx cuts a waiting phase
// short, and the bring-up returns ctx's error, not complete.
func TestBringUpStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	started := make(chan struct{})
	b := testBringUp(t, ctx, bringUpPhase{name: "wait", makes: certsInPlace, do: func(_ *bringUp, ctx context.Context) (bool, error) {
		close(started)
		<-ctx.Done()
		return false, ctx.Err()
	}})
	errc := make(chan error, 1)
	go func() { errc <- b.run(ctx) }()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("bring-up returned %v; want context.Canceled", err)
	}
}

// TestBringUpTriesTransientErrorsAgain: a phase marked retried that meets
// an etcd error that passes by itself (a request timed out) is tried
// again, and the bring-up completes; the same error in a phase not marked
// so ends the bring-up.
func TestBringUpTriesTransientErrorsAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var r phaseRecorder
	tries := 0
	flaky := r.phase("registration", []output{certsInPlace}, storeConnected, func() (bool, error) {
		tries++
		if tries < 3 {
			return false, fmt.Errorf("agent: register: %w", rpctypes.ErrTimeout)
		}
		return true, nil
	})
	flaky.retried = true
	b := testBringUp(t, ctx, r.phase("first", nil, certsInPlace, done), flaky)
	if err := b.run(ctx); err != nil {
		t.Fatalf("bring-up with a transient error in a retried phase: %v", err)
	}
	if tries != 3 {
		t.Fatalf("the retried phase ran %d times; want 3", tries)
	}

	fatal := r.phase("pki", nil, certsInPlace, func() (bool, error) { return false, rpctypes.ErrTimeout })
	if err := testBringUp(t, ctx, fatal).run(ctx); !errors.Is(err, rpctypes.ErrTimeout) {
		t.Fatalf("bring-up with a transient error in a phase not retried: %v; want it to end with the error", err)
	}
}
