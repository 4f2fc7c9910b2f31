package objectapply

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
)

func manifest(lastModified int64, rev, digest, host string) *api.FlakeObjects {
	m := api.NewFlakeObjects()
	m.Spec = api.FlakeObjectsSpec{Revision: rev, LastModified: lastModified}
	m.Status = api.FlakeObjectsStatus{Digest: digest, Host: host}
	return m
}

// TestDecide: which manifest the fleet follows when hosts carry different
// ones.
func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name   string
		record *api.FlakeObjects
		m      *api.FlakeObjects
		host   string
		want   Verdict
		reason string
	}{
		{"first manifest", nil, manifest(100, "aaa", "d1", ""), "cp-1", Apply, "no manifest"},
		{"a newer commit", manifest(100, "aaa", "d1", "cp-1"), manifest(200, "bbb", "d2", ""), "cp-2", Apply, "orders after"},
		{"an older commit on a host not yet switched", manifest(200, "bbb", "d2", "cp-2"), manifest(100, "aaa", "d1", ""), "cp-1", Superseded, "orders before"},
		{"an older commit, whatever its revision string", manifest(200, "aaa", "d2", "cp-2"), manifest(100, "zzz", "d1", ""), "cp-1", Superseded, "orders before"},
		{"same commit time: the revision orders", manifest(100, "aaa", "d1", "cp-1"), manifest(100, "bbb", "d2", ""), "cp-2", Apply, "orders after"},
		{"same commit time, the lesser revision", manifest(100, "bbb", "d2", "cp-2"), manifest(100, "aaa", "d1", ""), "cp-1", Superseded, "orders before"},
		{"the same manifest again (idempotent)", manifest(100, "aaa", "d1", "cp-1"), manifest(100, "aaa", "d1", ""), "cp-2", Apply, "is the one applied"},
		{"the same host rebuilt a dirty tree", manifest(100, "aaa-dirty", "d1", "cp-1"), manifest(100, "aaa-dirty", "d2", ""), "cp-1", Apply, "this host's build"},
		{"another host declares the revision otherwise", manifest(100, "aaa", "d1", "cp-1"), manifest(100, "aaa", "d2", ""), "cp-2", Conflict, "applied by cp-1 with other objects"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.record, tc.m, tc.host)
			if d.Verdict != tc.want || !strings.Contains(d.Reason, tc.reason) {
				t.Fatalf("Decide = %v %q, want %v with %q", d.Verdict, d.Reason, tc.want, tc.reason)
			}
		})
	}
}

// TestDecideNeverFlipFlops: for every pair of manifests, at most one of
// them replaces the other, so hosts applying in any order end on the
// same one.
func TestDecideNeverFlipFlops(t *testing.T) {
	ms := []*api.FlakeObjects{
		manifest(100, "aaa", "d1", "cp-1"), manifest(100, "bbb", "d2", "cp-2"),
		manifest(200, "aaa", "d3", "cp-3"), manifest(50, "zzz", "d4", "cp-1"),
		manifest(100, "aaa", "d5", "cp-2"),
	}
	for _, a := range ms {
		for _, b := range ms {
			if a == b {
				continue
			}
			ab := Decide(a, b, b.Status.Host).Verdict == Apply
			ba := Decide(b, a, a.Status.Host).Verdict == Apply
			if ab && ba && a.Status.Digest != b.Status.Digest && a.Status.Host != b.Status.Host {
				t.Errorf("%s and %s each replace the other", describe(a.Spec), describe(b.Spec))
			}
		}
	}
}

// TestRemovalOf: what becomes of an object the flake no longer declares.
func TestRemovalOf(t *testing.T) {
	for _, tc := range []struct {
		kind, policy string
		want         Removal
	}{
		{api.KindMachinePool, "", Delete},
		{api.KindMachinePool, api.ClusterRemovalDelete, Delete},
		{api.KindEtcdCluster, api.ClusterRemovalDelete, Release},
		{api.KindKubernetesCluster, "", Release},
		{api.KindKubernetesCluster, api.ClusterRemovalOrphan, Release},
		{api.KindKubernetesCluster, api.ClusterRemovalDelete, MarkDeletion},
	} {
		if got := RemovalOf(tc.kind, tc.policy); got != tc.want {
			t.Errorf("RemovalOf(%s, %q) = %v, want %v", tc.kind, tc.policy, got, tc.want)
		}
	}
}

// TestDrift: the fields whose running spec differs from the flake's.
func TestDrift(t *testing.T) {
	flake, err := json.Marshal(api.MachinePoolSpec{Count: 3, Template: api.MachineTemplate{VCPUs: 2}})
	if err != nil {
		t.Fatal(err)
	}
	rec := api.NewFlakeObjects()
	rec.Status.Objects = []api.DeclaredObject{{Kind: api.KindMachinePool, Name: "vms", Spec: flake}}
	got, err := Drift(rec, api.KindMachinePool, "vms", api.MachinePoolSpec{Count: 5, Template: api.MachineTemplate{VCPUs: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "spec.count: flake 3, running 5" {
		t.Fatalf("drift %q, want spec.count only", got)
	}
	if got, _ := Drift(rec, api.KindMachinePool, "other", api.MachinePoolSpec{}); got != nil {
		t.Fatalf("drift of an object the flake does not declare: %q", got)
	}
}
