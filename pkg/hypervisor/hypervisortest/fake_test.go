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
