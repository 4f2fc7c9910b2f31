// Package restore restores a nico fleet's etcd cluster from a snapshot and
// recovers it after a quorum loss, as one journaled, resumable operation
// (docs/disaster-recovery.md).
//
// Both go through the same steps; a recovery skips the restore and starts
// its survivor with --force-new-cluster instead:
//
//	StopAndFence ----> RestoreTarget ----> StartTarget ----> JournalInNewCluster
//	 every member       target's data      the new cluster     the Operation and the
//	 stopped; the old   dir replaced by    (new cluster ID)    one-change slot copied
//	 data dirs fenced   etcdutl restore    serves on target    into the new cluster
//	       |            (recover: skipped)                              |
//	       |                                                            v
//	       +-- a fenced data dir is never served      Done <-- ReleaseSlot <-- RejoinOthers
//	           again (member.ErrFenced): wiped,                             one at a time, in order:
//	           then joined as a learner                                     wipe, learner, promote
//
// The Journal is a file, saved after every step: the cluster it restores
// is down during the first steps, so the journal cannot live there. Once
// the new cluster serves, the journal is also written there as an
// Operation (api.OpRestore, api.OpRecover) holding store.ActiveOpKey.
// The coordinators plan nothing on a held cluster (store.Hold): a restored
// member starts with the snapshot's store.ClusterIDKey, which names the
// old cluster, so the hold is there from its first start; ReleaseSlot
// records the new cluster's ID. A recovered member keeps its cluster's
// ID: StartTarget first serves it on a private loopback client URL,
// writes the journal there, and only then serves it at its own
// (serveHeld). Only the voters rejoin: control-plane
// hosts that were not members (standbys) are left as they are.
package restore
