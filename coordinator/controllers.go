package coordinator

import (
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/store"
)

// The leader's controllers, run as one group for the length of a term
// (Coordinator.term). Each watches only the prefixes it reads; what has no
// watch (etcd's member list, gossip, the clock) comes with the resync tick;
// while a learner is a member, membership also wakes itself every
// LearnerObserveEvery (reconciler.go). Every controller but membership,
// the switch guard and rollouts lets store events gather for Config.Settle
// before it reconciles, so that the writes of a join or a removal are
// answered by membership alone while they happen. The switch guard answers
// at once because a host's pre-switch check waits on it; rollouts because
// a data-plane node's finish starts the next node (a pass with no rollout
// in flight reads the rollouts and stops). Every pass of every controller
// first reads the cluster's hold (coordinator/hold.go): while a restore or
// recovery holds the cluster it plans nothing, and each controller also
// watches cluster-id and active-op so that the hold's end wakes it.
//
//	controller            watches                                      writes (fenced)
//	membership            nodes/ joins/ removals/ heartbeats/ ops/     ops/ active-op joins/ removals/
//	                      active-op etcdcluster                        nodes/ liveness etcdcluster,
//	                                                                   etcd members
//	rollout               rollouts/ nixosconfigs/ nodes/ heartbeats/   rollouts/ nixosconfigs/ ops/
//	                      active-op componentreports/                  active-op, etcd leader,
//	                                                                   clusters' Nodes (cordon, evict)
//	machine-pools         pools/ machineclaims/ machines/              pools/ machines/ removals/
//	                      hypervisors/ nodes/ removals/ heartbeats/    machineclaims/ (status)
//	etcd-machines         etcdcluster machineclaims/ machines/ nodes/  machineclaims/etcd (spec)
//	                      joins/ removals/ heartbeats/ (liveness read
//	                      on each pass, not watched)
//	identity-revocation   removals/ nodes/ heartbeats/                 removals/, etcd users and roles
//	etcd-status           nodes/ active-op etcdcluster                 etcdcluster status, ops/ active-op,
//	                                                                   etcd defragment, alarm disarm
//	etcd-version          etcdcluster etcdversions/ nodes/ active-op   etcdversions/ ops/ active-op,
//	                                                                   etcd leader, etcd downgrade
//	kubernetes-clusters   clusters/ clusterclaims/ componentreports/    clusters/ (status, deletion) clusterclaims/
//	                      machineclaims/                               machineclaims/<cluster>-<plane> (spec)
//	                      nodes/ heartbeats/ machines/ nixosconfigs/   rollouts/ (its own), secrets (hooks),
//	                      rollouts/ drainrequests/                     drainrequests/ (spec)
//	                      kubeconfigreports/
//	snapshots             etcdcluster snapshot-drill                   etcdcluster status.snapshots,
//	                                                                   snapshots in the destination
//	etcd-compaction       etcdcluster active-op                        etcdcluster status.compaction,
//	                                                                   etcd compaction
//	switch-guard          switches/ active-op nodes/                   switches/ (status) ops/ active-op,
//	                                                                   etcd leader
//	journal               (reads ops/ each JournalEvery)               ops/ (finished ones deleted)
func (c *Coordinator) leaderControllers(fence store.Fence) []controller.Controller {
	resync, settle := c.cfg.ResyncInterval, c.cfg.Settle
	d := c.leaderDeps(fence)
	snaps := c.snapshotter(d)
	membership := newReconciler(c.membershipDeps(d, snaps))
	return (&holdGate{st: d.st, fence: d.fence, log: d.log}).gated([]controller.Controller{
		&controller.Func{
			ControllerName: "membership", Resync: resync, Do: membership.reconcile, Wake: membership.wake,
			Prefixes: []string{store.NodesDir, store.JoinsDir, store.RemovalsDir, store.HeartbeatsDir, store.OpsDir, store.ActiveOpKey, store.EtcdClusterKey, store.ExternalMembersDir},
		},
		&controller.Func{
			// Not settled: a node's finish starts the next one.
			ControllerName: "rollout", Resync: resync, Do: newRollouter(d, c.cfg.Policy, &c.cfg.Clusters, snaps).reconcile,
			Prefixes: []string{store.RolloutsDir, store.NixosConfigsDir, store.NodesDir, store.HeartbeatsDir, store.ActiveOpKey, store.ComponentReportsDir},
		},
		&controller.Func{
			ControllerName: "machine-pools", Resync: resync, Settle: settle, Do: newPoolController(d).reconcile,
			Prefixes: []string{store.PoolsDir, store.ClaimsDir, store.MachinesDir, store.HypervisorsDir, store.NodesDir, store.RemovalsDir, store.HeartbeatsDir},
		},
		&controller.Func{
			ControllerName: "etcd-machines", Resync: resync, Settle: settle, Do: newEtcdMachines(d, c.cfg.Policy).reconcile,
			Prefixes: []string{store.EtcdClusterKey, store.ClaimsDir, store.MachinesDir, store.NodesDir, store.JoinsDir, store.RemovalsDir, store.HeartbeatsDir},
		},
		&controller.Func{
			ControllerName: "identity-revocation", Resync: resync, Settle: settle, Do: newRevoker(d, c.cfg.RevokeRemovedAfter).reconcile,
			Prefixes: []string{store.RemovalsDir, store.NodesDir, store.HeartbeatsDir},
		},
		&controller.Func{
			ControllerName: "etcd-status", Resync: resync, Settle: settle, Do: newEtcdStatuser(d, c.maint).reconcile,
			Prefixes: []string{store.NodesDir, store.ActiveOpKey, store.EtcdClusterKey},
		},
		&controller.Func{
			ControllerName: "etcd-version", Resync: resync, Settle: settle, Do: newVersionRoller(d).reconcile,
			Prefixes: []string{store.EtcdClusterKey, store.EtcdVersionsDir, store.NodesDir, store.ActiveOpKey},
		},
		&controller.Func{
			ControllerName: "kubernetes-clusters", Resync: resync, Settle: settle, Do: newClusterController(d, &c.cfg.Clusters, snaps).reconcile,
			Prefixes: []string{store.ClustersDir, store.ClusterClaimsDir, store.ClaimsDir, store.ComponentReportsDir, store.NodesDir, store.HeartbeatsDir,
				store.MachinesDir, store.NixosConfigsDir, store.RolloutsDir, store.DrainRequestsDir, store.KubeconfigReportsDir},
		},
		&controller.Func{
			ControllerName: "snapshots", Resync: resync, Settle: settle, Do: newSnapshotSchedule(d, snaps).reconcile,
			Prefixes: []string{store.EtcdClusterKey, store.SnapshotDrillKey},
			// A pass that takes a snapshot is bounded by spec.snapshots.timeout.
			Policy: controller.HealthPolicy{StallAfter: -1},
		},
		&controller.Func{
			// Not settled: a host's pre-switch check waits on its answer.
			ControllerName: "switch-guard", Resync: resync, Do: newSwitchGuard(d).reconcile,
			Prefixes: []string{store.SwitchesDir, store.ActiveOpKey, store.NodesDir},
		},
		&controller.Func{
			ControllerName: "etcd-compaction", Resync: resync, Settle: settle, Do: newEtcdCompactor(d).reconcile,
			Prefixes: []string{store.EtcdClusterKey, store.ActiveOpKey},
		},
		&controller.Func{
			ControllerName: "journal", Resync: resync, Settle: settle,
			Do: (&journal{st: d.st, fence: d.fence, now: d.now, log: d.log, policy: c.cfg.Journal}).reconcile,
		},
	})
}
