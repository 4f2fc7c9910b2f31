package hypervisor

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/hypervisor"
	"github.com/homystack/nico/pkg/hypervisor/hypervisortest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/jonboulle/clockwork"
)

// TestMachineRetries walks the per-machine backoff through failures,
// passes before and after the delay, a changed action and a success.
func TestMachineRetries(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	errA := errors.New("a")
	type step struct {
		op      string // fail, due, ok, keep (keepOnly with no machines)
		uuid    string
		sig     string
		at      time.Duration
		wantDue bool
		wantErr error
		delay   time.Duration
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"never failed: due", []step{{op: "due", uuid: "u", sig: "s", wantDue: true}}},
		{"delays double and hold the action back", []step{
			{op: "fail", uuid: "u", sig: "s", delay: time.Second},
			{op: "due", uuid: "u", sig: "s", at: 999 * time.Millisecond, wantErr: errA},
			{op: "due", uuid: "u", sig: "s", at: time.Second, wantDue: true},
			{op: "fail", uuid: "u", sig: "s", at: time.Second, delay: 2 * time.Second},
			{op: "due", uuid: "u", sig: "s", at: 2 * time.Second, wantErr: errA},
			{op: "due", uuid: "u", sig: "s", at: 3 * time.Second, wantDue: true},
			{op: "fail", uuid: "u", sig: "s", at: 3 * time.Second, delay: 4 * time.Second},
		}},
		{"capped at Max", []step{
			{op: "fail", uuid: "u", sig: "s", delay: time.Second},
			{op: "fail", uuid: "u", sig: "s", delay: 2 * time.Second},
			{op: "fail", uuid: "u", sig: "s", delay: 4 * time.Second},
			{op: "fail", uuid: "u", sig: "s", delay: 5 * time.Second},
			{op: "fail", uuid: "u", sig: "s", delay: 5 * time.Second},
		}},
		{"a changed action is tried at once and starts over", []step{
			{op: "fail", uuid: "u", sig: "s", delay: time.Second},
			{op: "fail", uuid: "u", sig: "s", delay: 2 * time.Second},
			{op: "due", uuid: "u", sig: "s2", wantDue: true},
			{op: "fail", uuid: "u", sig: "s2", delay: time.Second},
		}},
		{"one machine's failures do not hold back another", []step{
			{op: "fail", uuid: "u", sig: "s", delay: time.Second},
			{op: "due", uuid: "v", sig: "s", wantDue: true},
		}},
		{"success forgets", []step{
			{op: "fail", uuid: "u", sig: "s", delay: time.Second},
			{op: "ok", uuid: "u"},
			{op: "due", uuid: "u", sig: "s", wantDue: true},
			{op: "fail", uuid: "u", sig: "s", delay: time.Second},
		}},
		{"a machine with no action left is forgotten", []step{
			{op: "fail", uuid: "u", sig: "s", delay: time.Second},
			{op: "fail", uuid: "u", sig: "s", delay: 2 * time.Second},
			{op: "keep"},
			{op: "fail", uuid: "u", sig: "s", delay: time.Second},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newMachineRetries(func() backoff.BackOff {
				return &backoff.ExponentialBackOff{InitialInterval: time.Second, Multiplier: 2, MaxInterval: 5 * time.Second}
			})
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				switch s.op {
				case "fail":
					if d := r.failed(s.uuid, s.sig, errA, now); d != s.delay {
						t.Fatalf("step %d: delay %v, want %v", i, d, s.delay)
					}
				case "due":
					if ok, err := r.due(s.uuid, s.sig, now); ok != s.wantDue || err != s.wantErr {
						t.Fatalf("step %d: due %v %v, want %v %v", i, ok, err, s.wantDue, s.wantErr)
					}
				case "ok":
					r.succeeded(s.uuid)
				case "keep":
					r.keepOnly(nil)
				}
			}
		})
	}
}

// TestHypervisorControllerBacksOffAFailingMachine: a machine whose define
// keeps failing is not redefined on every pass, keeps its condition, is
// retried once its delay is over, and at once when its spec changes; the
// other machines are unaffected.
func TestHypervisorControllerBacksOffAFailingMachine(t *testing.T) {
	st := hvStore(t)
	fake := hypervisortest.NewFake(8, 8192)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := New(Config{Node: "hv-1", Retry: func() backoff.BackOff {
		return &backoff.ExponentialBackOff{InitialInterval: 10 * time.Second, Multiplier: 2, MaxInterval: time.Minute}
	}}, st, fake, logging.Test(t))
	c.Now = func() time.Time { return now }
	bad := placedMachine("web-0", "hv-1", 0)
	bad.Spec.Template.Network = "nope"
	putMachine(t, st, bad)

	want := func(defines int, actions ...string) {
		t.Helper()
		got := once(t, c)
		if fmt.Sprint(got) != fmt.Sprint(actions) || fake.Calls("Define") != defines {
			t.Fatalf("at %v: actions %v and %d defines, want %v and %d", now.Format(time.TimeOnly), got, fake.Calls("Define"), actions, defines)
		}
	}
	want(1, "create web-0")
	want(1) // held back
	putMachine(t, st, placedMachine("web-1", "hv-1", 1))
	want(2, "create web-1") // another machine is not held back
	m := getMachine(t, st, "web-0")
	if c := hvCond(m); c == nil || c.Status || c.Reason != "UnknownNetwork" {
		t.Fatalf("held-back machine's condition %+v", c)
	}
	now = now.Add(10 * time.Second)
	want(3, "create web-0") // due: fails again, now for 20 s
	now = now.Add(19 * time.Second)
	want(3)
	now = now.Add(time.Second)
	want(4, "create web-0")
	// Fixed spec: tried at once.
	m = getMachine(t, st, "web-0")
	m.Spec.Template.Network = "default"
	putMachine(t, st, m)
	want(5, "create web-0")
	if ds := domainsOf(t, fake); ds["web-0"].State != hypervisor.Running || ds["web-1"].State != hypervisor.Running {
		t.Fatalf("domains %+v", ds)
	}
	if c := hvCond(getMachine(t, st, "web-0")); c == nil || !c.Status {
		t.Fatalf("condition after the fix %+v", c)
	}
}

func hvCond(m *api.Machine) *api.Condition {
	return api.FindCondition(m.Status.Conditions, api.CondProvisioned)
}

// TestHypervisorControllerWakesWhenAHeldBackMachineIsDue: under the
// runtime, with no event and the resync an hour away, a machine held back
// by its backoff is tried again as soon as its delay is over.
func TestHypervisorControllerWakesWhenAHeldBackMachineIsDue(t *testing.T) {
	st := hvStore(t)
	fake := hypervisortest.NewFake(8, 8192)
	clk := clockwork.NewFakeClock()
	c := New(Config{Node: "hv-1", Resync: time.Hour, Retry: func() backoff.BackOff {
		return &backoff.ExponentialBackOff{InitialInterval: 10 * time.Second, Multiplier: 2, MaxInterval: time.Minute}
	}}, st, fake, logging.Test(t))
	c.clock, c.Now = clk, clk.Now
	bad := placedMachine("web-0", "hv-1", 0)
	bad.Spec.Template.Network = "nope"
	putMachine(t, st, bad)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rt := controller.New(st.Client(), controller.WithClock(clk), controller.WithLogger(logging.Test(t)))
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx, c.Controller()) }()
	defer func() { cancel(); <-done }()
	testwait.True(t, 10*time.Second, "the first define", func() bool { return fake.Calls("Define") == 1 })
	// The resync ticker and the held-back machine's wake wait on the clock.
	if err := clk.BlockUntilContext(ctx, 2); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	testwait.True(t, 10*time.Second, "the define retried once due", func() bool { return fake.Calls("Define") == 2 })
}
