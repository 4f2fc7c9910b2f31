package hypervisortest

import "testing"

func TestFakeContract(t *testing.T) {
	Contract(t, func(t *testing.T, foreign ...string) Env {
		f := NewFake(8, 8192)
		e := Env{HV: f, Foreign: map[string]string{}}
		for _, name := range foreign {
			e.Foreign[name] = f.AddForeign(name)
		}
		return e
	})
}

// TestFakeConsole: what a guest writes is counted while its domain runs and
// starts afresh at the next start.
func TestFakeConsole(t *testing.T) {
	ctx := t.Context()
	f := NewFake(8, 8192)
	const u = "11111111-2222-4333-8444-555555555501"
	if err := f.Define(ctx, Spec("vm-1", u)); err != nil {
		t.Fatal(err)
	}
	if f.WriteConsole(u, 10) {
		t.Fatal("a stopped domain wrote to its console")
	}
	if err := f.Start(ctx, u); err != nil {
		t.Fatal(err)
	}
	f.WriteConsole(u, 10)
	f.WriteConsole(u, 5)
	if n, err := f.ConsoleBytes(ctx, u); err != nil || n != 15 {
		t.Fatalf("console %d %v, want 15", n, err)
	}
	if err := f.Stop(ctx, u, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Start(ctx, u); err != nil {
		t.Fatal(err)
	}
	if n, err := f.ConsoleBytes(ctx, u); err != nil || n != 0 {
		t.Fatalf("console after a restart %d %v, want 0", n, err)
	}
}
