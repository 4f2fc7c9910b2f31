package ctl

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
)

func TestPoolCommands(t *testing.T) {
	c := etcdtest.Start(t, 1)
	st := newStore(t, c)
	eps := c.Endpoints()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("web.yaml", `apiVersion: nico.homystack.io/v1
kind: MachinePool
metadata:
  name: web
spec:
  count: 3
  spread: true
  template:
    vcpus: 2
    memoryMiB: 2048
    diskGiB: 20
    baseImage: nixos.qcow2
    network: default
`)
	run(t, eps, "pool", "apply", "-f", good).want(t, 0, nil, nil)
	p := api.NewMachinePool("web")
	if err := st.Get(testCtx(t), store.PoolKey("web"), p); err != nil || p.Spec.Count != 3 || !p.Spec.Spread || p.Spec.Template.MemoryMiB != 2048 {
		t.Fatalf("pool %+v %v", p.Spec, err)
	}
	run(t, eps, "pool", "scale", "web", "1").want(t, 0, nil, nil)
	run(t, eps, "pool", "get").want(t, 0, []string{"web", "2048MiB", "default/nixos.qcow2"}, nil)
	run(t, eps, "-o", "json", "pool", "get", "web").want(t, 0, []string{`"count": 1`}, nil)

	m := api.NewMachine("web-0")
	m.Spec = api.MachineSpec{Kind: api.MachineLibvirt, Pool: "web", Host: "hv-1"}
	m.Status = api.MachineStatus{Phase: api.MachineRunning, DomainState: "running", Addresses: []string{"192.168.122.5"},
		Conditions: []api.Condition{{Type: api.CondProvisioned, Status: false, Message: "no such network"}}}
	if err := st.Put(testCtx(t), store.MachineKey("web-0"), m); err != nil {
		t.Fatal(err)
	}
	run(t, eps, "pool", "machines", "web").want(t, 0, []string{"web-0", "hv-1", "Running", "192.168.122.5", "Provisioned=false (no such network)"}, nil)

	// Bad input: clear messages, nothing written.
	run(t, eps, "pool", "apply", "-f", write("typo.yaml", "apiVersion: nico.homystack.io/v1\nkind: MachinePool\nmetadata: {name: x}\nspec: {cont: 3}\n")).
		want(t, 2, nil, []string{`unknown field "cont"`})
	run(t, eps, "pool", "apply", "-f", write("kind.yaml", "apiVersion: nico.homystack.io/v1\nkind: Machine\nmetadata: {name: x}\n")).
		want(t, 2, nil, []string{`kind "Machine" is not accepted`})
	run(t, eps, "pool", "apply", "-f", write("group.yaml", "apiVersion: nico.example/v1\nkind: MachinePool\nmetadata: {name: x}\n")).
		want(t, 2, nil, []string{`apiVersion: "nico.example/v1" is not accepted; use nico.homystack.io/v1 (nico.homystack.com/v1 is still read, deprecated)`})
	run(t, eps, "pool", "apply", "-f", write("old.yaml", "apiVersion: nico.homystack.com/v1\nkind: MachinePool\nmetadata: {name: old}\nspec: {count: 0}\n")).
		want(t, 0, nil, []string{`old.yaml: apiVersion: "nico.homystack.com/v1" is deprecated; write apiVersion: nico.homystack.io/v1`})
	run(t, eps, "pool", "apply").want(t, 2, nil, []string{"-f FILE"})
	run(t, eps, "pool", "scale", "web", "--", "-2").want(t, 2, nil, []string{"want 0 or more"})
	run(t, eps, "pool", "scale", "nope", "2").want(t, 4, nil, []string{`no machine pool "nope"`})
	run(t, eps, "pool", "get", "nope").want(t, 4, nil, nil)
	if err := st.Get(testCtx(t), store.PoolKey("x"), api.NewMachinePool("x")); err == nil {
		t.Fatal("a bad pool was written")
	}
}
