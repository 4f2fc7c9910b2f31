// Package kubepki makes and keeps the secret material of a
// KubernetesCluster: its certificate authorities and certificates under
// Cluster API's secret names, the admin kubeconfig, the join token, an SSH
// key per machine, the cluster's own etcd user and role on nico's etcd,
// and the host files (kubeadm's layout under /etc/kubernetes/pki) that
// deliver them to its machines outside the Nix store.
//
// # Secrets
//
// Every secret is an api.Secret under store.NamedSecretKey(name), sealed
// with the store's secrets key (package secrets); only root identities
// (the coordinator) read that range. Names, keys and who gets them:
//
//	<c>-ca                     tls.crt tls.key   cluster CA (or the user's)   crt: all; key: control plane
//	<c>-etcd                   tls.crt tls.key   etcd CA (provider external/distribution only)
//	<c>-sa                     tls.crt tls.key   service-account public/private key   control plane
//	<c>-proxy                  tls.crt tls.key   front-proxy CA               crt: control plane
//	<c>-apiserver-etcd-client  tls.crt tls.key   API server's etcd client     control plane
//	<c>-kubeconfig             value             admin kubeconfig             nobody (nicoctl)
//	<c>-apiserver              tls.crt tls.key   API server serving cert      control plane
//	<c>-apiserver-kubelet-client, <c>-proxy-client   tls.crt tls.key          control plane
//	<c>-controller-manager, <c>-scheduler            value (kubeconfig)       control plane
//	<c>-join-token             value             the servers' join token      control plane
//	<c>-bootstrap-token        value expiration kubeconfig   bootstrap token  all
//	<c>-ssh.<machine>          ssh-privatekey ssh-publickey   that machine only
//
// The first six are Cluster API's; the others are what a control plane
// that does not mint its own certificates needs (kubeadm makes them on
// the node from ca.key; here no machine but the leader signs anything).
// Ensure creates what is missing and never regenerates what exists:
// a CA, a key pair, a token or an SSH key, once written, stays. A machine
// never reads these directly: Project copies the keys each machine's host
// files name into its own api.NodeSecrets, sealed to its node certificate
// key, in the node's own secrets dir (readable by that node and root,
// package rbac) — so a data-plane machine never holds a CA key and no
// machine holds another cluster's secrets.
//
// # Lifetimes
//
// The bootstrap token (bootstrap.go) lives BootstrapTokenTTL and is
// replaced once less than a third is left; its kubeconfig follows the
// endpoint and the CA.
//
// CAs live DefaultCAValidity (10 years). Every leaf certificate (client
// and serving) lives LeafValidity (7 days) and is re-issued by Renew once
// less than a third of it is left (pki.DueLeaves' rule), or when it was
// signed by another CA or its names changed; the kubeconfigs embedding
// client certificates are re-made with them.
//
// # etcd (provider nico)
//
// The API server stores its data in nico's etcd under EtcdPrefix(c) =
// /clusters/<c>/registry: it is started with
//
//	--etcd-prefix=/clusters/<c>/registry --etcd-compaction-interval=0
//
// and joins every key it writes as prefix + "/" + resource path, so all
// its keys start with /clusters/<c>/registry/ (EtcdKeyPrefix). The
// cluster's etcd user kubernetes:<c> (the CN of <c>-apiserver-etcd-client)
// has one role of the same name granting READWRITE on the etcd key range
// [/clusters/<c>/registry/, /clusters/<c>/registry0): the trailing slash
// matters, for without it the range would also cover
// /clusters/<c>/registryX and, for a prefix /clusters/<c>, the sibling
// cluster /clusters/<c>x/. Nothing else: not nico's keys, not another
// cluster's. --etcd-compaction-interval=0 is required: the API server's
// own compactor reads and writes compact_rev_key at the root of the
// keyspace and calls Compact, which needs etcd's root role; compacting the
// shared etcd belongs to whoever runs it, not to a tenant: the coordinator
// leader's etcd-compaction controller compacts nico's etcd to the window
// of its EtcdCluster's spec.policy.compactionRetention. With it off, the API server
// touches nothing outside its prefix (TestRealAPIServer runs a real one
// and finds no permission denied in its log).
//
// A distribution that cannot set a prefix (k3s: /bootstrap/<hash> and
// /registry/...; KubernetesCluster spec.etcd.namespace) reaches etcd
// through a namespacing proxy on each server (package etcdnsproxy,
// nico-etcd-proxy) that prefixes every key with EtcdNamespace(c) =
// /clusters/<c>/; its role (EnsureNamespacedEtcdIdentity,
// EtcdNamespacePerms) then covers that namespace and nothing else.
//
// Deleting a cluster (Delete) removes its etcd user and role, every key
// under /clusters/<c>/ — the cluster's Kubernetes objects, for good — and
// its secrets.
//
// The coordinator leader calls Ensure, Unproject and Delete with a secret
// store fenced on its term (secrets.Store.Fenced) and Project with the
// fence: a deposed leader's write of a secret or a projection is refused
// (store.ErrNotLeader) and changes nothing. etcd's auth API (the user and
// role) has no transactions and is not fenced; those calls are idempotent.
package kubepki
