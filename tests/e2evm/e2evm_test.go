// Package e2evm is nico's real-VM tier (make e2e-vm, tests/e2evm/run.sh): a
// real libvirtd with qemu, in a network namespace, boots a guest made here
// from Debian's kernel and a busybox initramfs with a static nico-agent; the
// guest reads its identity from SMBIOS and joins the cluster as a worker,
// or, drawn by an EtcdCluster, as an etcd voter.
// Outside make e2e-vm (NICO_E2EVM_DIR unset) only the unit tests of the
// guest builder run.
package e2evm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/placement"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/token"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The cluster and the guests live on the isolated libvirt network "nico".
const (
	hostIP   = "10.77.0.1"
	network  = "nico"
	imageDir = "/var/lib/libvirt/images"
)

const networkXML = `<network>
  <name>nico</name>
  <bridge name='virbr-nico' stp='off' delay='0'/>
  <ip address='10.77.0.1' netmask='255.255.255.0'>
    <dhcp><range start='10.77.0.10' end='10.77.0.200'/></dhcp>
  </ip>
</network>`

// TestGuestJoins: on a cluster with mutual TLS, a MachinePool scaled from 0
// to 1 gets a VM on the hypervisor host, the VM boots, reads its name,
// roles, the mesh's seeds and the join token from SMBIOS, gets its
// certificate from the join endpoint on the seed's host with the token
// alone, learns the etcd endpoints through gossip and registers its node; scaled back to 0,
// the node leaves and the domain goes. Three runs; the time from the
// scale-up to the node registered is reported with its median. Then an
// EtcdCluster grows to three voters with two VMs and replaces one
// destroyed by hand (etcdVMs), and libvirtd is restarted while a guest
// boots (lostConnection).
func TestGuestJoins(t *testing.T) {
	w := os.Getenv("NICO_E2EVM_DIR")
	if w == "" {
		t.Skip("the real-VM tier runs with make e2e-vm (root, libvirtd, qemu, a network namespace)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Minute)
	defer cancel()

	// libvirt: the network, a storage pool and a base image for overlays.
	netFile := filepath.Join(w, "network.xml")
	must(t, os.WriteFile(netFile, []byte(networkXML), 0o644))
	virsh(t, "net-define", netFile)
	virsh(t, "net-start", network)
	virsh(t, "pool-define-as", "default", "dir", "--target", imageDir)
	virsh(t, "pool-build", "default")
	virsh(t, "pool-start", "default")
	run(t, "qemu-img", "create", "-q", "-f", "qcow2", filepath.Join(imageDir, "base.qcow2"), "1G")
	virsh(t, "pool-refresh", "default")

	guestDir := filepath.Join(w, "guest")
	must(t, os.MkdirAll(guestDir, 0o755))
	kernel, initrd := buildGuest(t, guestDir, filepath.Join(w, "guest-agent"))
	domainType, why := chooseAccel(t, w, kernel)
	guestType, guestTypeWhy = domainType, why
	t.Logf("e2e-vm: guests run as domain type %s: %s", domainType, why)
	// The cluster's first join token: the bootstrap machine serves the join
	// endpoint with it, and hands it to its VMs.
	tok, err := token.Generate()
	must(t, err)
	tokenPath := filepath.Join(w, "token")
	must(t, os.WriteFile(tokenPath, []byte(tok.Reveal()+"\n"), 0o600))

	// The cluster: one agent bootstraps etcd and is the hypervisor host, a
	// coordinator places machines.
	hvArgs := []string{"--name", "hv-1", "--roles", "controlPlane,hypervisor", "--bootstrap", "--dataDir", filepath.Join(w, "hv-1"),
		"--etcd.peerURL", "https://" + hostIP + ":2380", "--etcd.clientURL", "https://" + hostIP + ":2379",
		"--tokenFile", tokenPath, "--gossip.bind", hostIP, "--join.listen", hostIP + ":7950",
		"--hypervisor.uri", "qemu:///system", "--hypervisor.resync", "1s", "--hypervisor.stopGrace", "20s",
		"--hypervisor.domainType", domainType, "--hypervisor.bootTimeout", bootTimeout.String()}
	stopHV := start(t, w, "hv-1", filepath.Join(w, "nico-agent"), hvArgs...)
	// The test reads the store as root, from hv-1's pki.dir.
	pkiDir := pki.Dir(filepath.Join(w, "hv-1", "pki"))
	eps := []string{"https://" + hostIP + ":2379"}
	waitFor(t, ctx, 2*time.Minute, "hv-1's root and coordinator certificates", func() (bool, string) {
		_, err1 := os.Stat(pkiDir.Cert(pki.RootLeaf))
		_, err2 := os.Stat(pkiDir.Cert(pki.CoordinatorLeaf))
		return err1 == nil && err2 == nil, fmt.Sprint(err1, err2)
	})
	tlsCfg, err := etcdclient.Files{CA: pkiDir.CACert(), Cert: pkiDir.Cert(pki.RootLeaf), Key: pkiDir.Key(pki.RootLeaf)}.Load(eps)
	must(t, err)
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: eps, DialTimeout: 5 * time.Second, TLS: tlsCfg})
	must(t, err)
	defer cli.Close()
	st, err := store.New(cli, store.DefaultPrefix)
	must(t, err)
	waitFor(t, ctx, 2*time.Minute, "hv-1 reports network nico and image default/base.qcow2", func() (bool, string) {
		hv := api.NewHypervisor("hv-1")
		if err := st.Get(ctx, store.HypervisorKey("hv-1"), hv); err != nil {
			return false, err.Error()
		}
		return slices.Contains(hv.Status.Networks, network) && slices.Contains(hv.Status.Images, "default/base.qcow2"), fmt.Sprintf("%+v", hv.Status)
	})
	start(t, w, "c-1", filepath.Join(w, "nico-coordinator"),
		"--name", "c-1", "--etcd.endpoints", eps[0], "--coordinator.resyncInterval", "500ms",
		"--tls.caFile", pkiDir.CACert(), "--tls.certFile", pkiDir.Cert(pki.CoordinatorLeaf), "--tls.keyFile", pkiDir.Key(pki.CoordinatorLeaf))

	runs := 3
	if n, err := strconv.Atoi(os.Getenv("NICO_E2EVM_RUNS")); err == nil && n > 0 {
		runs = n
	}
	var took []time.Duration
	for i := 0; i < runs; i++ {
		name := fmt.Sprintf("vm%d", i)
		d := scaleUpToNode(t, ctx, st, w, name, kernel, initrd)
		took = append(took, d)
		t.Logf("run %d: pool %s scaled 0 -> 1, node %s registered after %v", i+1, name, placement.MachineName(name, 0), d.Round(10*time.Millisecond))
		scaleDown(t, ctx, st, name)
	}
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	t.Logf("e2e-vm: pool scale-up (0 -> 1) to the guest's node registered: median %v of %v (domain type %s)", sorted[len(sorted)/2].Round(10*time.Millisecond), took, domainType)
	if f := os.Getenv("NICO_E2EVM_RESULT"); f != "" {
		must(t, os.WriteFile(f, fmt.Appendf(nil, "scale-up to node registered, median of %d: %v (runs %v), domain type %s: %s\n", runs, sorted[len(sorted)/2].Round(10*time.Millisecond), took, domainType, why), 0o644))
	}

	newClient := func() *clientv3.Client {
		c, err := etcdclient.New(etcdclient.Config{Endpoints: eps, DialTimeout: 5 * time.Second, TLS: tlsCfg})
		must(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	etcdVMs(t, ctx, st, newClient, kernel, initrd)

	lostConnection(t, ctx, st, w, kernel, initrd)

	// The host restarted, handing its VMs a token that is not the cluster's.
	stopHV()
	wrong, err := token.Generate() // well formed, but no token of this cluster
	must(t, err)
	bad := filepath.Join(w, "wrong-token")
	must(t, os.WriteFile(bad, []byte(wrong.Reveal()+"\n"), 0o600))
	start(t, w, "hv-1-wrong-token", filepath.Join(w, "nico-agent"), append(hvArgs, "--hypervisor.guestTokenFile", bad)...)
	wrongToken(t, ctx, st, w, kernel, initrd)
}

// wrongToken: a guest handed a token that is not the cluster's is refused
// by the join endpoint (the host logs the refusal) and never registers.
func wrongToken(t *testing.T, ctx context.Context, st *store.Store, w, kernel, initrd string) {
	t.Helper()
	const pool = "vmbad"
	name := placement.MachineName(pool, 0)
	putPool(t, ctx, st, pool, kernel, initrd)
	scale(t, ctx, st, pool, 1)
	logPath := filepath.Join(w, "hv-1-wrong-token.log")
	waitFor(t, ctx, 10*time.Minute, "the join endpoint to refuse "+name+"'s token", func() (bool, string) {
		b, _ := os.ReadFile(logPath)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "join refused") && strings.Contains(l, "source=10.77.0.") {
				return true, ""
			}
		}
		m := &api.Machine{}
		if err := st.Get(ctx, store.MachineKey(name), m); err != nil {
			return false, err.Error()
		}
		notBooting(t, m)
		return false, fmt.Sprintf("machine %s %v", m.Status.Phase, m.Status.Addresses)
	})
	if err := st.Get(ctx, store.NodeKey(name), &api.Node{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("%s with a wrong token: node lookup %v, want not found", name, err)
	}
	t.Logf("%s with a wrong token was refused by the join endpoint and did not register", name)
}

// lostConnection restarts libvirtd while a new machine's domain boots: the
// host's agent sees the connection gone (hypervisor unavailable), backs off
// and reconnects; the guest still joins, and its domain exists once.
func lostConnection(t *testing.T, ctx context.Context, st *store.Store, w, kernel, initrd string) {
	t.Helper()
	const pool = "vmr"
	name := placement.MachineName(pool, 0)
	putPool(t, ctx, st, pool, kernel, initrd)
	scale(t, ctx, st, pool, 1)
	waitFor(t, ctx, 2*time.Minute, name+"'s domain running", func() (bool, string) {
		return slices.Contains(strings.Fields(virshOut(t, "list", "--name")), name), ""
	})
	logPath := filepath.Join(w, "hv-1.log")
	before, err := os.ReadFile(logPath)
	must(t, err)

	pidFile := filepath.Join(w, "libvirtd.pid")
	b, err := os.ReadFile(pidFile)
	must(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	must(t, err)
	must(t, syscall.Kill(pid, syscall.SIGTERM))
	waitFor(t, ctx, time.Minute, "libvirtd stopped", func() (bool, string) {
		return syscall.Kill(pid, 0) != nil, ""
	})
	waitFor(t, ctx, time.Minute, "hv-1 to see libvirt unavailable", func() (bool, string) {
		after, _ := os.ReadFile(logPath)
		return len(after) > len(before) && strings.Contains(string(after[len(before):]), "hypervisor: unavailable"), ""
	})
	run(t, "libvirtd", "-d", "-p", pidFile)
	t.Log("libvirtd restarted")

	waitFor(t, ctx, 10*time.Minute, "node "+name+" registered after libvirtd restarted", func() (bool, string) {
		if st.Get(ctx, store.NodeKey(name), &api.Node{}) == nil {
			return true, ""
		}
		m := &api.Machine{}
		if err := st.Get(ctx, store.MachineKey(name), m); err != nil {
			return false, err.Error()
		}
		notBooting(t, m)
		return false, fmt.Sprintf("machine %s %v", m.Status.Phase, m.Status.Conditions)
	})
	n := 0
	for _, d := range strings.Fields(virshOut(t, "list", "--all", "--name")) {
		if d == name {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d domains named %s after libvirtd restarted", n, name)
	}
	waitFor(t, ctx, 2*time.Minute, name+" running again in its status", func() (bool, string) {
		m := &api.Machine{}
		if err := st.Get(ctx, store.MachineKey(name), m); err != nil {
			return false, err.Error()
		}
		return m.Status.Phase == api.MachineRunning, string(m.Status.Phase)
	})
	scaleDown(t, ctx, st, pool)
}

// putPool writes pool with count 0 and the guest's template, and waits for
// the leader to find it valid.
func putPool(t *testing.T, ctx context.Context, st *store.Store, pool, kernel, initrd string) {
	t.Helper()
	p := api.NewMachinePool(pool)
	p.Spec = api.MachinePoolSpec{Count: 0, Template: api.MachineTemplate{
		VCPUs: 1, MemoryMiB: 512, DiskGiB: 1, BaseImage: "base.qcow2", Network: network,
		Boot: &api.KernelBoot{Kernel: kernel, Initrd: initrd, Cmdline: "console=ttyS0 panic=-1"},
	}}
	must(t, st.Put(ctx, store.PoolKey(pool), p))
	waitFor(t, ctx, time.Minute, "pool "+pool+" valid", func() (bool, string) {
		got := api.NewMachinePool(pool)
		if err := st.Get(ctx, store.PoolKey(pool), got); err != nil {
			return false, err.Error()
		}
		c := api.FindCondition(got.Status.Conditions, api.CondValid)
		return c != nil && c.Status, fmt.Sprintf("%+v", got.Status.Conditions)
	})
}

// scaleUpToNode puts pool with count 0, waits for the leader to find it
// valid, scales it to 1 and returns the time until the guest's node is
// registered; it checks the machine's status (running, its address,
// discoverable) and that the guest was handed no etcd endpoints.
func scaleUpToNode(t *testing.T, ctx context.Context, st *store.Store, w, pool, kernel, initrd string) time.Duration {
	t.Helper()
	putPool(t, ctx, st, pool, kernel, initrd)
	scale(t, ctx, st, pool, 1)
	t0 := time.Now()
	name := placement.MachineName(pool, 0)
	var stopConsole func()
	var consoleSince time.Time
	waitFor(t, ctx, 10*time.Minute, "node "+name+" registered", func() (bool, string) {
		if err := st.Get(ctx, store.NodeKey(name), &api.Node{}); err == nil {
			return true, ""
		}
		if stopConsole == nil && slices.Contains(strings.Fields(virshOut(t, "list", "--name")), name) {
			if stopConsole = console(t, w, name); stopConsole != nil { // from the domain's start
				consoleSince = time.Now()
			}
		}
		if stopConsole != nil && guestType != "auto" {
			silentConsole(t, filepath.Join(w, name+".console"), name, consoleSince)
		}
		m := &api.Machine{}
		if err := st.Get(ctx, store.MachineKey(name), m); err != nil {
			return false, "machine: " + err.Error()
		}
		notBooting(t, m)
		return false, fmt.Sprintf("machine %s on %q: %s %v", name, m.Spec.Host, m.Status.Phase, m.Status.Conditions)
	})
	took := time.Since(t0)
	if stopConsole != nil {
		t.Cleanup(stopConsole) // through the scale-down too
	}
	waitFor(t, ctx, 2*time.Minute, name+" running, discoverable, with its address", func() (bool, string) {
		m := &api.Machine{}
		if err := st.Get(ctx, store.MachineKey(name), m); err != nil {
			return false, err.Error()
		}
		ok := m.Status.Phase == api.MachineRunning && m.Status.Discoverable &&
			slices.ContainsFunc(m.Status.Addresses, func(a string) bool { return strings.HasPrefix(a, "10.77.0.") })
		return ok, fmt.Sprintf("%+v", m.Status)
	})
	// It got its certificate from the join endpoint with the token.
	b, _ := os.ReadFile(filepath.Join(w, "hv-1.log"))
	if !slices.ContainsFunc(strings.Split(string(b), "\n"), func(l string) bool {
		return strings.Contains(l, `msg="machine joined"`) && strings.Contains(l, " node="+name+" ")
	}) {
		t.Fatalf("hv-1's join endpoint logged no join of %s", name)
	}
	// The guest was handed seeds and the token, not etcd endpoints: it got
	// in through the join endpoint and the mesh.
	dump := virshOut(t, "dumpxml", name)
	if !strings.Contains(dump, "io.systemd.credential:nico.seeds="+hostIP+":7946") || strings.Contains(dump, "nico.endpoints") {
		t.Fatalf("%s's OEM strings: want seeds and no endpoints:\n%s", name, dump)
	}
	return took
}

// scaleDown scales pool to 0 and waits for the node to leave and the
// domain to go.
func scaleDown(t *testing.T, ctx context.Context, st *store.Store, pool string) {
	t.Helper()
	scale(t, ctx, st, pool, 0)
	name := placement.MachineName(pool, 0)
	waitFor(t, ctx, 5*time.Minute, name+" removed and its domain gone", func() (bool, string) {
		m := &api.Machine{}
		err := st.Get(ctx, store.MachineKey(name), m)
		doms := virshOut(t, "list", "--all", "--name")
		gone := !slices.Contains(strings.Fields(doms), name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return gone, "domains: " + doms
		case err != nil:
			return false, err.Error()
		}
		return false, fmt.Sprintf("machine %s %v", m.Status.Phase, m.Status.Conditions)
	})
}

func scale(t *testing.T, ctx context.Context, st *store.Store, pool string, count int) {
	t.Helper()
	for {
		p := api.NewMachinePool(pool)
		must(t, st.Get(ctx, store.PoolKey(pool), p))
		p.Spec.Count = count
		err := st.Update(ctx, store.PoolKey(pool), p)
		if !errors.Is(err, store.ErrConflict) {
			must(t, err)
			return
		}
	}
}
