package ctl

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
	"gopkg.in/yaml.v3"
)

// etcdClusterYAML is an EtcdCluster file with voters, version and the
// external members given as YAML list items.
func etcdClusterYAML(voters int, version string, members ...string) string {
	s := fmt.Sprintf("apiVersion: %s\nkind: EtcdCluster\nmetadata:\n  name: etcd\nspec:\n  voters: %d\n", api.Version, voters)
	if version != "" {
		s += "  version: " + version + "\n"
	}
	s += "  policy:\n    learnerStartTimeout: 90s\n    replaceDeadMembersAfter: 10m\n    defragFragmentation: 0.5\n"
	if len(members) > 0 {
		s += "  members:\n"
		for _, m := range members {
			s += m
		}
	}
	return s
}

// external is one external member as a YAML list item.
func external(name, peer, client string) string {
	return fmt.Sprintf("  - name: %s\n    kind: external\n    peerURLs: [%s]\n    clientURLs: [%s]\n", name, peer, client)
}

// modRevision is the EtcdCluster key's mod revision (0: absent).
func modRevision(t *testing.T, st *store.Store) int64 {
	t.Helper()
	kv, err := st.GetKV(testCtx(t), store.EtcdClusterKey)
	if err != nil {
		return 0
	}
	return kv.ModRevision
}

func storedCluster(t *testing.T, st *store.Store) *api.EtcdCluster {
	t.Helper()
	ec := &api.EtcdCluster{}
	if err := st.Get(testCtx(t), store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	return ec
}

func TestEtcdClusterApply(t *testing.T) {
	c := etcdtest.Start(t, 1)
	st := newStore(t, c)
	registerNode(t, st, "cp-1", c.Members[0])
	eps := c.Endpoints()
	dir := t.TempDir()
	n := 0
	write := func(body string) string {
		n++
		p := filepath.Join(dir, fmt.Sprintf("ec-%d.yaml", n))
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	extPeer := fmt.Sprintf("https://127.0.0.1:%d", etcdtest.FreePort(t))
	extClient := fmt.Sprintf("https://127.0.0.1:%d", etcdtest.FreePort(t))
	ext1 := external("ext-1", extPeer, extClient)
	// refused runs apply with body, wants the exit code and every piece
	// of the message, and checks that nothing was written.
	refused := func(t *testing.T, body string, code int, says ...string) {
		t.Helper()
		before := modRevision(t, st)
		run(t, eps, "apply", "-f", write(body)).want(t, code, nil, append(says, "nothing written"))
		if after := modRevision(t, st); after != before {
			t.Fatalf("a refused apply wrote the EtcdCluster: mod revision %d -> %d", before, after)
		}
	}

	run(t, eps, "get", "etcdcluster").want(t, ExitNotFound, nil, []string{"no EtcdCluster yet"})

	t.Run("bad input before any object", func(t *testing.T) {
		refused(t, etcdClusterYAML(4, ""), ExitUsage, "spec.voters: 4 is not accepted", "an even count tolerates no more failures than the odd one below it", "use 1, 3, 5 or 7")
		refused(t, etcdClusterYAML(0, ""), ExitUsage, "spec.voters: 0 is not accepted", "at least one voter")
		refused(t, etcdClusterYAML(3, "3.9.1"), ExitUsage, `spec.version: "3.9.1" is not accepted`, "not an etcd release nico knows", "3.7.0-3.7.3")
		// The embedded members run 3.7.3: two minors down is refused.
		refused(t, etcdClusterYAML(3, "3.5.35"), ExitRefused, `spec.version: "3.5.35" is not accepted`, "from a member's running version 3.7.3", "downgrade to 3.6.16 first")
		refused(t, etcdClusterYAML(3, "", external("ext-x", c.Members[0].PeerURL, extClient)), ExitRefused,
			`spec.members[0].peerURLs[0]: "`+c.Members[0].PeerURL+`" is not accepted`, "already the peer URL of etcd member cp-1")
		refused(t, etcdClusterYAML(3, "", external("cp-1", extPeer, extClient)), ExitRefused,
			`spec.members[0].name: "cp-1" is not accepted`, "already the name of")
		refused(t, strings.Replace(etcdClusterYAML(3, ""), "voters:", "votrs:", 1), ExitUsage, `unknown field "votrs"`)
		refused(t, strings.Replace(etcdClusterYAML(3, ""), "name: etcd", "name: other", 1), ExitUsage, `metadata.name "other" is not accepted`)
	})

	t.Run("create, keep status, update", func(t *testing.T) {
		run(t, eps, "apply", "-f", write(etcdClusterYAML(3, "3.7.3", ext1))).want(t, 0, []string{"EtcdCluster etcd created"}, nil)
		ec := storedCluster(t, st)
		if ec.Spec.Voters != 3 || ec.Spec.Version != "3.7.3" || len(ec.Spec.Members) != 1 || ec.Spec.Members[0].PeerURLs[0] != extPeer ||
			time.Duration(ec.Spec.Policy.LearnerStartTimeout) != 90*time.Second || ec.Spec.Policy.DefragFragmentation != 0.5 || ec.Metadata.CreatedAt.IsZero() {
			t.Fatalf("stored %+v", ec)
		}
		// The leader writes status; an apply keeps it.
		ec.Status = api.EtcdClusterStatus{Voters: 1, FaultTolerance: 0, Leader: "cp-1", ClusterVersion: "3.7.0"}
		if err := st.UpdateObject(testCtx(t), ec); err != nil {
			t.Fatal(err)
		}
		run(t, eps, "apply", "-f", write(etcdClusterYAML(3, "3.7.3", ext1))).want(t, 0, []string{"EtcdCluster etcd unchanged"}, nil)
		run(t, eps, "apply", "-f", write(etcdClusterYAML(5, "3.7.3", ext1))).want(t, 0, []string{"EtcdCluster etcd configured"}, nil)
		if ec := storedCluster(t, st); ec.Spec.Voters != 5 || ec.Status.Leader != "cp-1" {
			t.Fatalf("stored %+v", ec)
		}
		run(t, eps, "apply", "-f", write(etcdClusterYAML(5, "3.7.0", ext1))).want(t, 0, []string{"version: Patch 3.7.3 -> 3.7.0"}, nil)
		run(t, eps, "apply", "-f", write(etcdClusterYAML(5, "3.6.16", ext1))).want(t, 0, []string{"version: Downgrade 3.7.0 -> 3.6.16"}, nil)
	})

	t.Run("bad input against the stored object", func(t *testing.T) {
		refused(t, etcdClusterYAML(6, "3.6.16", ext1), ExitUsage, "spec.voters: 6", "6 voters can lose 2, as 5 can")
		// From the stored 3.6.16, a minor up must start at the latest 3.6
		// patch, which it is; but 3.6.10 -> 3.7.3 is not.
		ec := storedCluster(t, st)
		ec.Spec.Version = "3.5.35"
		if err := st.UpdateObject(testCtx(t), ec); err != nil {
			t.Fatal(err)
		}
		refused(t, etcdClusterYAML(5, "3.7.3", ext1), ExitRefused, `spec.version: "3.7.3" is not accepted`, "from the stored spec.version 3.5.35",
			"2 minors up", "upgrade to 3.6.16 first, then 3.7.x")
		refused(t, etcdClusterYAML(5, "4.0.0", ext1), ExitUsage, `spec.version: "4.0.0"`)
		// Both the running version (3.7.3) and the stored one must allow it.
		refused(t, etcdClusterYAML(5, "3.5.30", ext1), ExitRefused, "from a member's running version 3.7.3", "2 minors down")
	})

	t.Run("an external member etcd has is refused unless declared before", func(t *testing.T) {
		// nico added ext-1 as a learner (it never starts here).
		cli := etcdtest.NewClient(t, eps...)
		if _, err := cli.MemberAddAsLearner(testCtx(t), []string{extPeer}); err != nil {
			t.Fatal(err)
		}
		// The stored spec (3.5.35 as the previous case left it) declares
		// ext-1 with that URL: re-applying it is fine.
		run(t, eps, "apply", "-f", write(etcdClusterYAML(3, "3.5.35", ext1))).want(t, 0, []string{"configured"}, nil)
		// Another name with the learner's peer URL is refused.
		refused(t, etcdClusterYAML(3, "3.5.35", external("ext-2", extPeer, fmt.Sprintf("https://127.0.0.1:%d", etcdtest.FreePort(t)))), ExitRefused,
			`spec.members[0].peerURLs[0]: "`+extPeer+`" is not accepted`, "already the peer URL of etcd member")
	})

	t.Run("top-level apply takes a MachinePool too", func(t *testing.T) {
		body := "apiVersion: nico.homystack.io/v1\nkind: MachinePool\nmetadata: {name: web}\nspec:\n  count: 2\n  template: {vcpus: 1, memoryMiB: 512, diskGiB: 4, baseImage: x.qcow2, network: default}\n"
		run(t, eps, "apply", "-f", write(body)).want(t, 0, nil, nil)
		if err := st.Get(testCtx(t), store.PoolKey("web"), api.NewMachinePool("web")); err != nil {
			t.Fatal(err)
		}
		run(t, eps, "apply", "-f", write("apiVersion: nico.homystack.io/v1\nkind: Node\n")).want(t, ExitUsage, nil, []string{`kind "Node" is not accepted; want EtcdCluster, MachinePool or KubernetesCluster`})
		run(t, eps, "apply").want(t, ExitUsage, nil, []string{"-f FILE"})
	})
}

func TestEtcdClusterGetAndDescribe(t *testing.T) {
	c := etcdtest.Start(t, 1)
	st := newStore(t, c)
	eps := c.Endpoints()
	ec := api.NewEtcdCluster()
	ec.Metadata.CreatedAt = time.Now().Add(-time.Hour)
	ec.Spec.Version = "3.7.3"
	ec.Spec.Members = []api.EtcdMemberSpec{{Name: "ext-1", Kind: api.MemberExternal, PeerURLs: []string{"https://10.0.0.9:2380"}, ClientURLs: []string{"https://10.0.0.9:2379"}}}
	ec.Spec.Policy = api.EtcdPolicy{LearnerStartTimeout: api.Duration(2 * time.Minute), ReplaceDeadMembersAfter: api.Duration(10 * time.Minute),
		DefragFragmentation: 0.5, DefragMinDBSize: 64 << 20, CompactionRetention: api.Duration(2 * time.Hour), CompactionMinRevisions: 1000}
	ec.Status = api.EtcdClusterStatus{
		Voters: 3, FaultTolerance: 1, Leader: "cp-1", ClusterVersion: "3.7.0", Alarms: []string{"NOSPACE on cp-3"},
		NoSpace: &api.NoSpaceEpisode{Members: []string{"cp-2"}, SeenAt: time.Now().Add(-10 * time.Minute), DBSize: 17 << 20, DBSizeQuota: 16 << 20,
			CompactedAt: 812, DisarmedAt: time.Now().Add(-9 * time.Minute), DBSizeAfter: 1 << 20},
		Members: []api.EtcdMemberStatus{
			{Name: "cp-1", Node: "cp-1", Role: api.RoleVoter, Healthy: true, Leader: true, Version: "3.7.3", RaftTerm: 4, RaftIndex: 1200, AppliedIndex: 1200, DBSize: 3 << 20, DBSizeInUse: 1 << 20},
			{Name: "cp-4", Node: "cp-4", Role: api.RoleStandby, Healthy: true},
			{Name: "ext-1", Role: api.RoleLearner, Version: "3.7.3", RaftIndex: 600, Progress: 0.5, ETA: api.Duration(12 * time.Second)},
		},
		Compaction: api.EtcdCompactionStatus{Revision: 4242, CompactedAt: time.Now().Add(-time.Minute), RetainedSince: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)},
		External:   []api.ExternalMemberStart{{Name: "ext-1", InitialCluster: "cp-1=https://10.0.0.1:2380,ext-1=https://10.0.0.9:2380", InitialClusterState: "existing"}},
		Conditions: []api.Condition{{Type: api.CondHealthy, Status: true}, {Type: api.CondReconciled, Status: false, Reason: "Joining", Message: "ext-1 catching up"}},
	}
	if err := st.CreateObject(testCtx(t), ec); err != nil {
		t.Fatal(err)
	}
	start := "--name=ext-1 --initial-cluster=cp-1=https://10.0.0.1:2380,ext-1=https://10.0.0.9:2380 --initial-cluster-state=existing"

	r := run(t, eps, "get", "etcdcluster")
	r.want(t, 0, []string{"NAME", "VOTERS", "CLUSTER VERSION", "FAULT TOLERANCE", "EXTERNAL MEMBER", start}, nil)
	if f := rowsByName(r.stdout)["etcd"]; len(f) < 8 || strings.Join(f[:8], " ") != "etcd 3/3 3.7.3 3.7.0 cp-1 can lose 1" {
		t.Errorf("row = %q", f)
	}

	var got api.EtcdCluster
	r = run(t, eps, "get", "etcdcluster", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Spec.Voters != 3 || got.Status.External[0].InitialClusterState != "existing" {
		t.Fatalf("json: %+v %v", got, err)
	}
	r = run(t, eps, "get", "etcdcluster", "-o", "yaml")
	var y struct {
		Kind string
		Spec struct {
			Policy struct {
				LearnerStartTimeout string `yaml:"learnerStartTimeout"`
			}
		}
	}
	if err := yaml.Unmarshal([]byte(r.stdout), &y); err != nil || y.Kind != api.KindEtcdCluster || y.Spec.Policy.LearnerStartTimeout != "2m0s" {
		t.Fatalf("yaml: %+v %v\n%s", y, err, r.stdout)
	}
	// What get -o yaml prints, apply takes back (status ignored).
	p := filepath.Join(t.TempDir(), "ec.yaml")
	if err := os.WriteFile(p, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, eps, "apply", "-f", p).want(t, 0, []string{"unchanged"}, nil)

	r = run(t, eps, "describe", "etcdcluster")
	r.want(t, 0, []string{
		"Voters:", "Version:", "3.7.3", "External members:", "https://10.0.0.9:2380",
		"Learner start timeout:", "2m0s", "Health timeout:", "the leader's setting", "Replace dead members after:", "10m0s",
		"Defragment at:", "50% fragmentation, databases over 64.0MiB",
		"Compaction keeps:", "2h0m0s, and at least the newest 1000 revisions", "Database quota:", "2.0GiB (etcd's default)",
		"Compacted:", "to revision 4242", "history since 2026-12-01T10:00:00Z kept",
		"3 (can lose 1)", "NOSPACE on cp-3",
		"Last NOSPACE:", "on cp-2", "database 17.0MiB of 16.0MiB quota; compacted at revision 812, disarmed", "at 1.0MiB",
		"NAME", "ROLE", "HEALTH", "INDEX", "DB SIZE", "IN USE", "3.0MiB", "1.0MiB", "standby", "50% (ETA 12s)",
		"Conditions:", "Reconciled", "Joining", "ext-1 catching up",
		"External members start with:", start,
		"Earlier clusters:", "- (none: no restore recorded)",
	}, nil)
	run(t, eps, "describe").want(t, ExitUsage, nil, []string{"describe: etcdcluster"})

	// Two restores back: the lineage's cluster IDs, oldest first, on one line.
	lin := api.NewClusterLineage([]api.EarlierCluster{{ClusterID: 0xa1, By: "restore-1"}, {ClusterID: 0xb2, By: "restore-2"}})
	if err := st.Put(testCtx(t), store.ClusterLineageKey, lin); err != nil {
		t.Fatal(err)
	}
	r = run(t, eps, "describe", "etcdcluster")
	r.want(t, 0, []string{"Earlier clusters:", "00000000000000a1, 00000000000000b2 (oldest first"}, nil)
	if n := strings.Count(r.stdout, "00000000000000a1"); n != 1 {
		t.Errorf("the earlier cluster shown %d times, want once:\n%s", n, r.stdout)
	}
	r.want(t, 0, []string{"Machine pool:", "- (none: the cluster asks no pool for VMs)"}, nil)

	// The machines the cluster asked its pool for, and where they run.
	cl := api.NewMachineClaim(api.EtcdClaimName)
	cl.Spec = api.MachineClaimSpec{Pool: "vms", Machines: []string{"vms-etcd-0", "vms-etcd-2"}, SpreadWith: []string{"cp-1"}, Quorum: true}
	cl.Status.Machines = []api.ClaimedMachine{{Name: "vms-etcd-0", Host: "hv-1", Domain: "rack-a", Phase: api.MachineRunning},
		{Name: "vms-etcd-1", Host: "hv-2", Domain: "hv-2", Phase: api.MachineDeleting, Released: true}, {Name: "vms-etcd-2", Phase: api.MachinePending}}
	cl.Status.Conditions = []api.Condition{{Type: api.CondSpread, Status: false, Reason: "QuorumAtRisk", Message: "losing rack-a would lose 2 of 3 voters (quorum 2)"}}
	if err := st.Put(testCtx(t), store.MachineClaimKey(api.EtcdClaimName), cl); err != nil {
		t.Fatal(err)
	}
	r = run(t, eps, "describe", "etcdcluster")
	r.want(t, 0, []string{"Machine pool:", "vms (no longer named", "Machines asked for:", "HOST", "DOMAIN",
		"Spread with:", "cp-1", "Spread:", "false QuorumAtRisk losing rack-a would lose 2 of 3 voters"}, nil)
	rows := rowsByName(r.stdout)
	for name, want := range map[string]string{"vms-etcd-0": "hv-1 rack-a Running listed", "vms-etcd-1": "hv-2 hv-2 Deleting released: being taken away", "vms-etcd-2": "- - Pending listed"} {
		if got := strings.Join(rows[name][1:], " "); got != want {
			t.Errorf("row %s = %q, want %q", name, got, want)
		}
	}
}

// TestCompactionCellOff: describe says compaction is off when
// spec.policy.compactionDisabled is set, not the retention it would keep.
func TestCompactionCellOff(t *testing.T) {
	if got := compactionCell(api.EtcdPolicy{CompactionDisabled: true}); !strings.HasPrefix(got, "off") {
		t.Fatalf("compactionCell = %q, want off", got)
	}
	if got := compactionCell(api.EtcdPolicy{}); !strings.HasPrefix(got, "1h0m0s") {
		t.Fatalf("compactionCell = %q, want the 1h default", got)
	}
}
