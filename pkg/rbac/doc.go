// Package rbac derives and applies nico's etcd users and roles
// (docs/security.md, "Identities"). etcd maps a client certificate's Common
// Name to the user of that name (--client-cert-auth); users have no
// password.
//
//	user              roles
//	root              root
//	nico-coordinator  root
//	node:<name>       node:<name>, and root on a control-plane node
//
// Role node:<name> (keys relative to the store prefix P):
//
//	read       [P, P+"secrets/") and [P+"secrets0", end of P): all but secrets
//	read       P+"secrets/nodes/<name>/"...: the node's own secrets
//	readwrite  nodes/<name>, heartbeats/<name>, joins/<name>, removals/<name>,
//	           nixosconfigs/<name> (its generation status)
//	readwrite  hypervisors/<name> and the machines/ range, on a hypervisor
//
// Plan is pure: it compares the wanted users and roles of some nodes with
// what etcd holds and returns the changes. Apply performs them through
// clientv3's Auth API, treating "already exists" as done, so that every
// entry point is idempotent: EnableAuth at bootstrap (users, roles, then
// auth enable) and EnsureNode when the join endpoint admits a node.
// RemoveNode deletes a removed node's user and role: its certificate,
// valid for a year, then reaches nothing (the coordinator's leader calls it
// once the node's removal is done, coordinator/revoke.go).
//
// What etcd v3.7 allows whom, with auth enabled (read from
// server/etcdserver: api/v3rpc/maintenance.go, server.go, v3_server.go):
//
//   - root only (IsAdminPermitted): MemberAdd, MemberRemove, MemberUpdate,
//     MemberPromote; MoveLeader, Defragment, Snapshot, Hash, HashKV,
//     Downgrade, Alarm activate/deactivate, Compact; every auth and user
//     and role call.
//   - any authenticated user: Status, Alarm GET, MemberList, LeaseGrant.
//   - LeaseRevoke and LeaseKeepAlive: write permission on every key attached
//     to the lease (a node can renew and revoke its heartbeat lease, not
//     another's); LeaseTimeToLive with keys and LeaseLeases: read permission
//     on the attached keys.
//   - Range, Put, DeleteRange, Txn (its compares included) and Watch: the
//     user's permissions must cover the whole key range.
//
// A control-plane node's user therefore also has role root: its agent hands
// etcd leadership off before its member stops (MoveLeader), and the machine
// holds the CA key anyway, so it could mint any identity. Worker and
// hypervisor nodes get only their own role.
package rbac
