// Package recovery is the recovery API a control-plane agent serves, the
// channel through which nicoctl restore and nicoctl recover act on every
// control-plane host without a fleet file and without etcd (the cluster has
// lost its quorum, or is being replaced). Each call acts on this host only:
//
//	survey   the member as it reports itself (member ID, cluster ID, applied
//	         index, revision, raft term) and the data dir as found on disk
//	stop     hold the host for an operation (the agent stops, its member
//	         with it) and fence the data dir when asked
//	snapshot store an uploaded snapshot, its sha256 checked against the
//	         one nicoctl declared
//	restore  the stored snapshot, hash checked again, restored into the
//	         data dir as a new one-member cluster
//	serve    start the member (with --force-new-cluster for a recovery)
//	rejoin   wipe the data dir, join the cluster that serves as a learner,
//	         promoted once in sync
//	release  stop the member the recovery serves and hand the host back to
//	         the agent, which serves it from its data dir from then on
//
// A host's states (the hold is a file beside the data dir, so that an agent
// restarted meanwhile does not take the host back):
//
//	[agent runs it] --stop(op)--> [held by op] --restore/serve/rejoin--> [held, member served by recovery]
//	       ^                           |                                          |
//	       +------- release(op) -------+------------------------------------------+
//
// Only a client certificate of the fleet CA whose Common Name is
// pki.RootIdentity (the operator's) may call it: a node's certificate is
// refused with 403, another CA's at the handshake. Every call is idempotent,
// so that a resumed nicoctl can call it again. The wire types are
// pkg/restore's (agentapi.go); restore.AgentFleet is the client.
package recovery
