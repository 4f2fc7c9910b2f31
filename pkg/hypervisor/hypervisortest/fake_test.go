package hypervisortest

import "testing"

func TestFakeContract(t *testing.T) {
	Contract(t, func(t *testing.T) Env {
		f := NewFake(8, 8192)
		return Env{HV: f, AddForeign: func(t *testing.T, name string) string { return f.AddForeign(name) }}
	})
}
