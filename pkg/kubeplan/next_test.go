package kubeplan

import (
	"slices"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
)

func TestNext(t *testing.T) {
	v1 := func(m string) api.NixosConfigurationSpec {
		return api.NixosConfigurationSpec{GitRepo: "https://git.example/k", Flake: "#" + m, OnRemoveFlake: OnRemoveFlake}
	}
	v2 := func(m string) api.NixosConfigurationSpec { s := v1(m); s.Revision = "v2"; return s }
	rel := func(string) api.NixosConfigurationSpec {
		return api.NixosConfigurationSpec{GitRepo: "https://git.example/k", Flake: OnRemoveFlake, OnRemoveFlake: OnRemoveFlake}
	}
	want := func(spec func(string) api.NixosConfigurationSpec) []Want {
		return []Want{{"cp-1", true, spec("cp-1")}, {"cp-2", true, spec("cp-2")}, {"dp-1", false, spec("dp-1")}}
	}
	cur := func(spec func(string) api.NixosConfigurationSpec, names ...string) map[string]*api.NixosConfigurationSpec {
		out := map[string]*api.NixosConfigurationSpec{}
		for _, n := range names {
			s := spec(n)
			s.Generation = 3
			out[n] = &s
		}
		return out
	}
	rollout := func(name string, phase api.RolloutPhase, nodes []string, spec func(string) api.NixosConfigurationSpec) *api.Rollout {
		r := api.NewRollout(name)
		r.Status.Phase, r.Spec.Nodes, r.Spec.Templates = phase, nodes, map[string]api.NixosConfigurationSpec{}
		for _, n := range nodes {
			r.Spec.Templates[n] = spec(n)
		}
		r.Status.HaltedNode, r.Status.HaltedReason = nodes[0], "generation 2 failed"
		return r
	}
	tests := []struct {
		name           string
		f              RollFacts
		action         Action
		nodes          []string
		cpFirst, drain bool
		reason         string
	}{
		{name: "new cluster: control plane first", f: RollFacts{Desired: want(v1)}, action: Roll, nodes: []string{"cp-1", "cp-2"}, cpFirst: true},
		{name: "the data plane waits for the API servers", f: RollFacts{Desired: want(v1), Current: cur(v1, "cp-1", "cp-2")}, action: Wait, nodes: []string{"dp-1"}, reason: "API servers"},
		{name: "then the data plane", f: RollFacts{Desired: want(v1), Current: cur(v1, "cp-1", "cp-2"), APIServerReady: true}, action: Roll, nodes: []string{"dp-1"}},
		{name: "in sync", f: RollFacts{Desired: want(v1), Current: cur(v1, "cp-1", "cp-2", "dp-1"), APIServerReady: true}, action: None},
		{name: "a change without a version change: data plane first", f: RollFacts{Desired: want(v2), Current: cur(v1, "cp-1", "cp-2", "dp-1"), APIServerReady: true},
			action: Roll, nodes: []string{"dp-1"}, reason: "data plane first"},
		{name: "then the control plane", f: RollFacts{Desired: want(v2), Current: merge(cur(v1, "cp-1", "cp-2"), cur(v2, "dp-1")), APIServerReady: true},
			action: Roll, nodes: []string{"cp-1", "cp-2"}, cpFirst: true},
		{name: "a version change: control plane first", f: RollFacts{Desired: want(v2), Current: cur(v1, "cp-1", "cp-2", "dp-1"), APIServerReady: true, VersionChange: true},
			action: Roll, nodes: []string{"cp-1", "cp-2"}, cpFirst: true, reason: "version"},
		{name: "one rollout at a time", f: RollFacts{Desired: want(v2), Current: cur(v1, "cp-1", "cp-2", "dp-1"), APIServerReady: true,
			Rollouts: []*api.Rollout{rollout("k1-1", api.RolloutRunning, []string{"dp-1"}, v2)}}, action: Wait, reason: "k1-1"},
		{name: "a halted rollout stops the cluster", f: RollFacts{Desired: want(v2), Current: cur(v1, "cp-1", "cp-2", "dp-1"), APIServerReady: true,
			Rollouts: []*api.Rollout{rollout("k1-1", api.RolloutSucceeded, []string{"dp-1"}, v1), rollout("k1-2", api.RolloutHalted, []string{"dp-1"}, v2)}}, action: Halted, reason: "generation 2 failed"},
		{name: "a new spec after a halt rolls again", f: RollFacts{Desired: want(v1), Current: merge(cur(v1, "cp-1", "cp-2"), cur(v2, "dp-1")), APIServerReady: true,
			Rollouts: []*api.Rollout{rollout("k1-2", api.RolloutHalted, []string{"dp-1"}, v2)}}, action: Roll, nodes: []string{"dp-1"}},
		{name: "a removed machine is drained and released", f: RollFacts{Desired: want(v1), Current: cur(v1, "cp-1", "cp-2", "dp-1", "dp-2"), APIServerReady: true,
			Release: map[string]api.NixosConfigurationSpec{"dp-2": rel("dp-2")}, Drain: true}, action: Release, nodes: []string{"dp-2"}, drain: true},
		{name: "the remaining machines roll before a release", f: RollFacts{Desired: want(v2), Current: cur(v1, "cp-1", "cp-2", "dp-1", "dp-2"), APIServerReady: true,
			Release: map[string]api.NixosConfigurationSpec{"dp-2": rel("dp-2")}}, action: Roll, nodes: []string{"dp-1"}},
		{name: "a released machine with no configuration is unclaimed", f: RollFacts{Desired: want(v1), Current: cur(v1, "cp-1", "cp-2", "dp-1"), APIServerReady: true,
			Release: map[string]api.NixosConfigurationSpec{"dp-2": rel("dp-2")}}, action: Unclaim, nodes: []string{"dp-2"}},
		{name: "a down machine is not rolled onto", f: RollFacts{Desired: want(v2), Current: merge(cur(v1, "cp-1", "cp-2"), cur(v2, "dp-1")), APIServerReady: true,
			Down: map[string]bool{"cp-2": true}}, action: Roll, nodes: []string{"cp-1"}, cpFirst: true},
		{name: "a down machine alone: nothing to roll", f: RollFacts{Desired: want(v2), Current: merge(cur(v1, "cp-2"), cur(v2, "cp-1", "dp-1")), APIServerReady: true,
			Down: map[string]bool{"cp-2": true}}, action: None},
		{name: "a new cluster's down machine waits", f: RollFacts{Desired: want(v1), Down: map[string]bool{"cp-1": true}}, action: Roll, nodes: []string{"cp-2"}, cpFirst: true},
		{name: "deletion releases every machine", f: RollFacts{Current: cur(v1, "cp-1", "cp-2", "dp-1"),
			Release: map[string]api.NixosConfigurationSpec{"cp-1": rel("cp-1"), "cp-2": rel("cp-2"), "dp-1": rel("dp-1")}}, action: Release, nodes: []string{"cp-1", "cp-2", "dp-1"}},
		{name: "deletion: a halted release stays halted", f: RollFacts{Current: cur(v1, "cp-1"),
			Release:  map[string]api.NixosConfigurationSpec{"cp-1": rel("cp-1")},
			Rollouts: []*api.Rollout{rollout("k1-3", api.RolloutHalted, []string{"cp-1"}, rel)}}, action: Halted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Next(tt.f)
			if p.Action != tt.action || !slices.Equal(p.Machines, tt.nodes) || p.ControlPlaneFirst != tt.cpFirst || p.Drain != tt.drain || !strings.Contains(p.Reason, tt.reason) {
				t.Fatalf("got %+v\nwant %s %v cpFirst=%v drain=%v reason~%q", p, tt.action, tt.nodes, tt.cpFirst, tt.drain, tt.reason)
			}
			for _, m := range p.Machines {
				if _, ok := p.Templates[m]; !ok && (p.Action == Roll || p.Action == Release) {
					t.Fatalf("no template for %s", m)
				}
			}
		})
	}
}

func merge(ms ...map[string]*api.NixosConfigurationSpec) map[string]*api.NixosConfigurationSpec {
	out := map[string]*api.NixosConfigurationSpec{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestMachineSpec(t *testing.T) {
	c := api.NewKubernetesCluster("k1")
	c.Spec.ConfigurationSubdir, c.Spec.CredentialsRef = "k3s", "git"
	s := MachineSpec(SpecInput{Cluster: c, DefaultGitRepo: "https://git.example/default", ClusterNix: "{ }",
		HostFiles: []api.HostFile{{Path: "/etc/kubernetes/pki/sa.pub", SecretRef: &api.SecretKeyRef{Name: "k1-sa", Key: "tls.crt"}},
			{Path: "/etc/kubernetes/pki/ca.crt", SecretRef: &api.SecretKeyRef{Name: "k1-ca", Key: "tls.crt"}}}}, "cp-1")
	if s.GitRepo != "https://git.example/default" || s.Flake != "#cp-1" || s.OnRemoveFlake != "#minimal" || s.ConfigurationSubdir != "k3s" || s.CredentialsRef != "git" {
		t.Fatalf("spec %+v", s)
	}
	if len(s.AdditionalFiles) != 1 || s.AdditionalFiles[0].Path != ClusterNixPath || s.AdditionalFiles[0].Inline != "{ }" {
		t.Fatalf("files %+v", s.AdditionalFiles)
	}
	if len(s.HostFiles) != 2 || s.HostFiles[0].Path != "/etc/kubernetes/pki/ca.crt" || s.HostFiles[1].SecretRef.Name != "k1-sa" {
		t.Fatalf("host files %+v, want both, by path", s.HostFiles)
	}
	if r := ReleaseSpec(c, "x"); r.Flake != OnRemoveFlake || len(r.AdditionalFiles)+len(r.HostFiles) != 0 || r.GitRepo != "x" {
		t.Fatalf("release %+v", r)
	}
}
