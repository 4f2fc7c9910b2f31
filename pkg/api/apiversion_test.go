package api

import (
	"strings"
	"testing"
)

func TestCheckAPIVersion(t *testing.T) {
	cases := []struct {
		want, got  string
		deprecated bool
		refused    []string
	}{
		{Version, Version, false, nil},
		{ClusterAPIVersion, ClusterAPIVersion, false, nil},
		{ClusterAPIVersion, "nico.homystack.com/v1alpha1", true, nil},
		{Version, "nico.homystack.com/v1", true, nil},
		{ClusterAPIVersion, Version, false, []string{`apiVersion: "nico.homystack.io/v1" is not accepted`,
			"use nico.homystack.io/v1alpha1 (nico.homystack.com/v1alpha1 is still read, deprecated)"}},
		{Version, "nico.example/v1", false, []string{`apiVersion: "nico.example/v1"`, "use nico.homystack.io/v1 "}},
		{Version, "", false, []string{`apiVersion: "" is not accepted`}},
	}
	for _, tc := range cases {
		deprecated, err := CheckAPIVersion(tc.want, tc.got)
		if deprecated != tc.deprecated {
			t.Errorf("CheckAPIVersion(%s, %q): deprecated %v, want %v", tc.want, tc.got, deprecated, tc.deprecated)
		}
		if tc.refused == nil {
			if err != nil {
				t.Errorf("CheckAPIVersion(%s, %q): %v", tc.want, tc.got, err)
			}
			continue
		}
		checkRefusal(t, err, tc.refused)
	}
}

func TestDecodeKubernetesClusterDeprecatedAPIVersion(t *testing.T) {
	doc := `{"apiVersion":"nico.homystack.com/v1alpha1","kind":"KubernetesCluster","metadata":{"name":"p"},"spec":{"controlPlane":{"machines":["a"]}}}`
	c, err := DecodeKubernetesCluster([]byte(doc))
	if err != nil {
		t.Fatalf("deprecated apiVersion refused: %v", err)
	}
	if old, err := UpgradeAPIVersions(c); err != nil || old != "nico.homystack.com/v1alpha1" || c.APIVersion != ClusterAPIVersion {
		t.Fatalf("upgrade: %q, %v; apiVersion %q, want it read as %s", old, err, c.APIVersion, ClusterAPIVersion)
	}
	if w := DeprecationWarning(ClusterAPIVersion, "nico.homystack.com/v1alpha1"); !strings.Contains(w, `apiVersion: "nico.homystack.com/v1alpha1" is deprecated; write apiVersion: nico.homystack.io/v1alpha1`) {
		t.Fatalf("warning %q", w)
	}
}

func TestUpgradeAPIVersions(t *testing.T) {
	cfg := NewNixosConfiguration("m1")
	cfg.APIVersion = "nico.homystack.com/v1"
	cfg.Metadata.OwnerReferences = []OwnerReference{{APIVersion: "nico.homystack.com/v1alpha1", Kind: KindKubernetesCluster, Name: "k1"}}
	if old, err := UpgradeAPIVersions(cfg); err != nil || old != "nico.homystack.com/v1" {
		t.Fatalf("upgrade: %q, %v", old, err)
	}
	if cfg.APIVersion != Version || cfg.Metadata.OwnerReferences[0].APIVersion != ClusterAPIVersion {
		t.Fatalf("after upgrade: %q, owner %q", cfg.APIVersion, cfg.Metadata.OwnerReferences[0].APIVersion)
	}
	cfg.APIVersion = "v2"
	_, err := UpgradeAPIVersions(cfg)
	checkRefusal(t, err, []string{`apiVersion: "v2" is not accepted`, "use nico.homystack.io/v1"})
}
