package e2evm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/tests/linearkv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdVMs: an EtcdCluster of hv-1's one voter with voters 3 and a machine
// pool gets two VMs, whose agents (the guest's static nico-agent, etcd
// embedded) find their own address, join through the join endpoint and
// become voters; one VM destroyed by hand (virsh destroy) is removed after
// replaceDeadMembersAfter and a fresh VM takes its place as a voter.
// Three porcupine-checked clients write throughout. Back to voters 1, the
// VMs are shed and their domains destroyed.
func etcdVMs(t *testing.T, ctx context.Context, st *store.Store, newClient func() *clientv3.Client, kernel, initrd string) {
	t.Helper()
	const pool = "etcdvm"
	putPool(t, ctx, st, pool, kernel, initrd)
	p := api.NewMachinePool(pool)
	must(t, st.Get(ctx, store.PoolKey(pool), p))
	p.Spec.Template.MemoryMiB = 1024 // an etcd member beside the agent, in the initramfs's RAM
	must(t, st.Put(ctx, store.PoolKey(pool), p))

	wctx, stopClients := context.WithCancel(ctx)
	_, waitClients := linearkv.Run(wctx, newClient, 3, 34, 20*time.Millisecond)
	defer func() { stopClients(); waitClients() }()

	t0 := time.Now()
	setEtcdCluster(t, ctx, st, func(s *api.EtcdClusterSpec) {
		s.Voters, s.MachinePool = 3, pool
		s.Policy.ReplaceDeadMembersAfter = api.Duration(30 * time.Second)
	})
	cli := newClient()
	first := waitVMVoters(t, ctx, st, cli, 2, nil)
	t.Logf("e2e-vm: EtcdCluster voters 1 -> 3 with VMs %v: %v (domain type %s)", first, time.Since(t0).Round(100*time.Millisecond), guestType)

	dead := first[0]
	t1 := time.Now()
	virsh(t, "destroy", dead)
	next := waitVMVoters(t, ctx, st, cli, 2, []string{dead})
	t.Logf("e2e-vm: VM voter %s destroyed by hand; voters again with %v after %v", dead, next, time.Since(t1).Round(100*time.Millisecond))

	stopClients()
	h := waitClients()
	v := linearkv.Check(t, cli, h, filepath.Join(os.TempDir(), "e2evm-etcd-history.html"))
	t.Logf("e2e-vm: clients made %d calls (%d failed or unknown), %d writes acknowledged, linearizable %s, %d lost, longest stall %v",
		v.Ops, v.Failed, h.Acked(), v.Linearizable, len(v.Lost), v.Stall.Round(time.Millisecond))
	if h.Acked() == 0 || v.Linearizable != porcupine.Ok || len(v.Lost) > 0 {
		t.Fatalf("the clients' history: %d acknowledged, %s, lost %v", h.Acked(), v.Linearizable, v.Lost)
	}

	// Back to one voter: the VMs are shed, then destroyed.
	setEtcdCluster(t, ctx, st, func(s *api.EtcdClusterSpec) { s.Voters = 1 })
	waitFor(t, ctx, 10*time.Minute, "the VM voters shed and their domains gone", func() (bool, string) {
		names, err := memberNames(ctx, cli)
		if err != nil {
			return false, err.Error()
		}
		doms := strings.Fields(virshOut(t, "list", "--all", "--name"))
		left := slices.DeleteFunc(doms, func(d string) bool { return !strings.HasPrefix(d, pool+"-") })
		return slices.Equal(names, []string{"hv-1"}) && len(left) == 0, fmt.Sprintf("members %v, domains %v", names, left)
	})
}

// waitVMVoters waits until the cluster's voters are hv-1 and n VMs of the
// EtcdCluster's claim, none of them in without, with no learner and every
// member answering; it returns the VMs.
func waitVMVoters(t *testing.T, ctx context.Context, st *store.Store, cli *clientv3.Client, n int, without []string) []string {
	t.Helper()
	var vms []string
	waitFor(t, ctx, 20*time.Minute, fmt.Sprintf("hv-1 and %d VM voters (not %v)", n, without), func() (bool, string) {
		c := api.NewMachineClaim(api.EtcdClaimName)
		claim := ""
		if err := st.Get(ctx, store.MachineClaimKey(api.EtcdClaimName), c); err == nil {
			claim = fmt.Sprintf("claim %v %+v", c.Spec.Machines, c.Status.Machines)
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := cli.MemberList(cctx)
		if err != nil {
			return false, err.Error()
		}
		vms = vms[:0]
		var all []string
		ok := len(resp.Members) == n+1
		for _, m := range resp.Members {
			all = append(all, fmt.Sprintf("%s learner=%v %v", m.Name, m.IsLearner, m.PeerURLs))
			if m.IsLearner || m.Name == "" || len(m.ClientURLs) == 0 {
				ok = false
				continue
			}
			if m.Name != "hv-1" {
				vms = append(vms, m.Name)
			}
			if slices.Contains(without, m.Name) {
				ok = false
			}
			if _, err := cli.Status(cctx, m.ClientURLs[0]); err != nil {
				ok = false
			}
		}
		slices.Sort(vms)
		return ok && len(vms) == n, fmt.Sprintf("members %v; %s", all, claim)
	})
	return slices.Clone(vms)
}

// memberNames are the cluster's members' names, sorted.
func memberNames(ctx context.Context, cli *clientv3.Client) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := cli.MemberList(cctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range resp.Members {
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out, nil
}

// setEtcdCluster changes the stored EtcdCluster's spec with mod (a new
// one when none is stored).
func setEtcdCluster(t *testing.T, ctx context.Context, st *store.Store, mod func(*api.EtcdClusterSpec)) {
	t.Helper()
	ec := api.NewEtcdCluster()
	if err := st.Get(ctx, store.EtcdClusterKey, ec); err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	mod(&ec.Spec)
	must(t, st.Put(ctx, store.EtcdClusterKey, ec))
}
