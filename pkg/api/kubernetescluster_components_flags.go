package api

// Why nico owns a flag: the reasons ownedFlags gives.
const (
	ownEtcd      = "nico sets it from the cluster's datastore (spec.etcd)"
	ownPKI       = "nico sets it to the certificates and keys it delivers (cluster.nix paths)"
	ownBootstrap = "kubelets join with the bootstrap token nico registers; turning it off stops every join"
	ownCompact   = "nico compacts its etcd itself (the EtcdCluster's spec.policy); the API servers must not"
	ownRollout   = "nico's rolling updates rely on it"
	ownKubecfg   = "nico sets it to the kubeconfig it delivers"
	ownNodeName  = "nico names each Node after its machine and judges readiness by that Node"
)

// ownedFlags are, per component, the flags the cluster's flake sets from
// cluster.nix and nico relies on, with why; extraArgs may not set them.
var ownedFlags = map[Part]map[string]string{
	PartAPIServer: {
		"etcd-servers":                     ownEtcd,
		"etcd-prefix":                      ownEtcd,
		"etcd-cafile":                      ownEtcd,
		"etcd-certfile":                    ownEtcd,
		"etcd-keyfile":                     ownEtcd,
		"etcd-compaction-interval":         ownCompact,
		"client-ca-file":                   ownPKI,
		"tls-cert-file":                    ownPKI,
		"tls-private-key-file":             ownPKI,
		"service-account-key-file":         ownPKI,
		"service-account-signing-key-file": ownPKI,
		"requestheader-client-ca-file":     ownPKI,
		"proxy-client-cert-file":           ownPKI,
		"proxy-client-key-file":            ownPKI,
		"enable-bootstrap-token-auth":      ownBootstrap,
		"shutdown-send-retry-after":        ownRollout,
		"advertise-address":                "nico advertises each machine's address from cluster.nix",
		"kubelet-preferred-address-types":  "the API server must reach the kubelets by the addresses nico gives the machines",
	},
	PartControllerManager: {
		"kubeconfig":                       ownKubecfg,
		"cluster-signing-cert-file":        ownPKI,
		"cluster-signing-key-file":         ownPKI,
		"service-account-private-key-file": ownPKI,
		"root-ca-file":                     ownPKI,
		"controllers":                      "nico needs bootstrapsigner and tokencleaner beside the defaults to sign and expire bootstrap tokens",
	},
	PartScheduler: {
		"kubeconfig": ownKubecfg,
	},
	PartKubelet: {
		"bootstrap-kubeconfig": ownBootstrap,
		"kubeconfig":           "the kubelet writes it once nico's cluster CA signs its certificate",
		"rotate-certificates":  "nico's cluster CA renews the kubelets' client certificates",
		"cert-dir":             "the kubelet keeps the certificate nico's cluster CA signs there",
		"hostname-override":    ownNodeName,
	},
}

// OwnedFlag tells why nico owns flag of component c, or "" when it does
// not.
func OwnedFlag(c Part, flag string) string { return ownedFlags[c][flag] }
