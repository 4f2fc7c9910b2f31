package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestKubernetesClusterJSONNames: the field names users already write.
func TestKubernetesClusterJSONNames(t *testing.T) {
	c := NewKubernetesCluster("k1")
	c.Spec = KubernetesClusterSpec{
		GitRepo: "https://example.org/f.git", ConfigurationSubdir: "k3s", CredentialsRef: "git",
		ControlPlane: ControlPlaneSpec{MachineSet: MachineSet{Machines: []string{"cp-1"}}},
		DataPlane:    DataPlaneSpec{MachineSet: MachineSet{MachineSelector: &MachineSelector{MatchLabels: map[string]string{"role": "worker"}}, Count: 2}},
		Version:      "1.37.2", ControlPlaneEndpoint: "k1.example.org:6443",
		Etcd: ClusterEtcd{Provider: EtcdProviderNico},
	}
	c.Status.Phase = ClusterReady
	c.Status.ControlPlane = ReplicaStatus{Ready: 1, Total: 1, ReadyMachines: []string{"cp-1"}}
	c.Status.Conditions, _ = SetClusterCondition(nil, ClusterCondition{Type: CondEtcdReady, Status: ConditionTrue, LastTransitionTime: time.Unix(1, 0).UTC()})
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"apiVersion":"nico.homystack.io/v1alpha1"`, `"kind":"KubernetesCluster"`, `"generation":1`,
		`"gitRepo"`, `"configurationSubdir"`, `"credentialsRef"`, `"controlPlane":{"machines":["cp-1"]}`,
		`"machineSelector":{"matchLabels":{"role":"worker"}},"count":2`, `"controlPlaneEndpoint"`,
		`"etcd":{"provider":"nico"}`, `"phase":"Ready"`, `"readyMachines":["cp-1"]`,
		`"lastTransitionTime":"1970-01-01T00:00:01Z"`, `"status":"True"`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s:\n%s", want, b)
		}
	}
}

func TestSetClusterConditionKeepsTransitionTime(t *testing.T) {
	t0, t1 := time.Unix(1, 0), time.Unix(2, 0)
	conds, _ := SetClusterCondition(nil, ClusterCondition{Type: CondAPIServerReady, Status: ConditionFalse, Reason: "Starting", LastTransitionTime: t0})
	conds, changed := SetClusterCondition(conds, ClusterCondition{Type: CondAPIServerReady, Status: ConditionFalse, Reason: "Probing", LastTransitionTime: t1})
	if !changed || !conds[0].LastTransitionTime.Equal(t0) || conds[0].Reason != "Probing" {
		t.Fatalf("same status: %+v changed=%v; want the reason updated and the time kept", conds, changed)
	}
	if _, changed := SetClusterCondition(conds, conds[0]); changed {
		t.Fatal("setting the same condition changed it")
	}
	conds, _ = SetClusterCondition(conds, ClusterCondition{Type: CondAPIServerReady, Status: ConditionTrue, LastTransitionTime: t1})
	if !conds[0].LastTransitionTime.Equal(t1) {
		t.Fatalf("transition kept the old time: %+v", conds[0])
	}
}

func TestProbeDefaults(t *testing.T) {
	p := ClusterProbes{Scheduler: &ComponentProbe{Disabled: true}}.WithDefaults()
	if p.APIServer.URL != DefaultAPIServerProbe.URL || p.ControllerManager.LeaderLease != "kube-system/kube-controller-manager" ||
		!p.Scheduler.Disabled || p.Scheduler.URL == "" || p.Interval == 0 {
		t.Fatalf("defaults: %+v", p)
	}
}
