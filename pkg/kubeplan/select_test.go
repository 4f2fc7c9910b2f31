package kubeplan

import (
	"slices"
	"testing"
)

func free(name string, labels ...string) Machine {
	m := Machine{Name: name, Discoverable: true, Labels: map[string]string{}}
	for i := 0; i+1 < len(labels); i += 2 {
		m.Labels[labels[i]] = labels[i+1]
	}
	return m
}

func TestSelect(t *testing.T) {
	cpSel := Group{MatchLabels: map[string]string{"role": "cp"}, Count: 3}
	dpSel := Group{MatchLabels: map[string]string{"role": "dp"}, Count: 2}
	fleet := func(mod func([]Machine)) []Machine {
		ms := []Machine{free("cp-10", "role", "cp"), free("cp-2", "role", "cp"), free("cp-1", "role", "cp"), free("cp-3", "role", "cp"),
			free("dp-1", "role", "dp"), free("dp-2", "role", "dp"), free("dp-3", "role", "dp")}
		if mod != nil {
			mod(ms)
		}
		return ms
	}
	at := func(ms []Machine, name string) *Machine {
		for i := range ms {
			if ms[i].Name == name {
				return &ms[i]
			}
		}
		panic(name)
	}
	tests := []struct {
		name           string
		cp, dp         Group
		machines       []Machine
		wantCP, wantDP []string
		missCP, missDP int
		unknown, held  []string
	}{
		{name: "selector takes free machines in natural name order", cp: cpSel, dp: dpSel, machines: fleet(nil),
			wantCP: []string{"cp-1", "cp-2", "cp-3"}, wantDP: []string{"dp-1", "dp-2"}},
		{name: "explicit machines take precedence, as given", cp: Group{Machines: []string{"cp-3", "cp-1"}, MatchLabels: map[string]string{"role": "cp"}, Count: 3}, dp: dpSel,
			machines: fleet(nil), wantCP: []string{"cp-3", "cp-1"}, wantDP: []string{"dp-1", "dp-2"}},
		{name: "a named machine that does not exist", cp: Group{Machines: []string{"cp-1", "cp-9"}}, machines: fleet(nil),
			wantCP: []string{"cp-1"}, unknown: []string{"cp-9"}},
		{name: "a named machine held by another cluster", cp: Group{Machines: []string{"cp-1", "cp-2"}},
			machines: fleet(func(ms []Machine) { at(ms, "cp-2").ClaimedBy = "other" }), wantCP: []string{"cp-1"}, held: []string{"cp-2"}},
		{name: "not discoverable, configured or held machines are skipped", cp: cpSel, dp: dpSel,
			machines: fleet(func(ms []Machine) {
				at(ms, "cp-1").Discoverable = false
				at(ms, "cp-2").HasConfiguration = true
				at(ms, "dp-1").ClaimedBy = "other"
			}),
			wantCP: []string{"cp-3", "cp-10"}, missCP: 1, wantDP: []string{"dp-2", "dp-3"}},
		{name: "machines the cluster holds stay first, even when down", cp: cpSel, dp: dpSel,
			machines: fleet(func(ms []Machine) {
				at(ms, "cp-10").ClaimedBy = "k1"
				at(ms, "cp-10").Discoverable = false
				at(ms, "cp-10").HasConfiguration = true
				at(ms, "dp-3").ClaimedBy = "k1"
			}),
			wantCP: []string{"cp-10", "cp-1", "cp-2"}, wantDP: []string{"dp-3", "dp-1"}},
		{name: "not enough machines", cp: Group{MatchLabels: map[string]string{"role": "cp"}, Count: 5}, dp: Group{MatchLabels: map[string]string{"role": "gpu"}, Count: 2},
			machines: fleet(nil), wantCP: []string{"cp-1", "cp-2", "cp-3", "cp-10"}, missCP: 1, missDP: 2},
		{name: "a machine is never in both planes", cp: Group{Machines: []string{"dp-1"}}, dp: dpSel, machines: fleet(nil),
			wantCP: []string{"dp-1"}, wantDP: []string{"dp-2", "dp-3"}},
		{name: "empty selector matches every machine", cp: Group{Count: 1}, machines: fleet(nil), wantCP: []string{"cp-1"}},
		{name: "a machine another claim asked a pool for is never free", cp: Group{Count: 2}, dp: dpSel,
			machines: fleet(func(ms []Machine) { at(ms, "cp-1").Claim = "etcd"; at(ms, "dp-1").Claim = "k2-dataplane" }),
			wantCP:   []string{"cp-2", "cp-3"}, wantDP: []string{"dp-2", "dp-3"}},
		{name: "the plane's own claimed machines first, whatever their labels", cp: Group{MatchLabels: map[string]string{"role": "cp"}, Count: 2, Claim: "k1-controlplane"},
			machines: fleet(func(ms []Machine) { at(ms, "dp-3").Claim = "k1-controlplane" }),
			wantCP:   []string{"dp-3", "cp-1"}},
		{name: "a plane with a pool and no selector takes its claim's machines only", cp: Group{Count: 2, Claim: "k1-controlplane", ClaimOnly: true},
			machines: fleet(func(ms []Machine) { at(ms, "dp-3").Claim = "k1-controlplane" }),
			wantCP:   []string{"dp-3"}, missCP: 1},
		{name: "a claim's VM dead past replaceDeadMembersAfter is let go, held or not", cp: Group{Count: 2, Claim: "k1-controlplane", ClaimOnly: true},
			machines: fleet(func(ms []Machine) {
				at(ms, "dp-2").Claim, at(ms, "dp-2").ClaimedBy, at(ms, "dp-2").Replace = "k1-controlplane", "k1", true
				at(ms, "dp-3").Claim, at(ms, "dp-3").Replace = "k1-controlplane", true
				at(ms, "dp-1").Claim = "k1-controlplane"
			}),
			wantCP: []string{"dp-1"}, missCP: 1},
		{name: "a named machine is kept however dead", cp: Group{Machines: []string{"cp-1"}},
			machines: fleet(func(ms []Machine) { at(ms, "cp-1").Replace = true }), wantCP: []string{"cp-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Select("k1", tt.cp, tt.dp, tt.machines)
			if !slices.Equal(s.ControlPlane, tt.wantCP) || !slices.Equal(s.DataPlane, tt.wantDP) {
				t.Errorf("cp %v dp %v, want %v %v", s.ControlPlane, s.DataPlane, tt.wantCP, tt.wantDP)
			}
			if s.MissingControlPlane != tt.missCP || s.MissingDataPlane != tt.missDP {
				t.Errorf("missing cp %d dp %d, want %d %d", s.MissingControlPlane, s.MissingDataPlane, tt.missCP, tt.missDP)
			}
			if !slices.Equal(s.Unknown, tt.unknown) || !slices.Equal(s.Held, tt.held) {
				t.Errorf("unknown %v held %v, want %v %v", s.Unknown, s.Held, tt.unknown, tt.held)
			}
		})
	}
}
