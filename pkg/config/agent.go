package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/logging"
	"github.com/spf13/pflag"
)

// Machine roles.
const (
	RoleControlPlane = "controlPlane"
	RoleWorker       = "worker"
)

// etcd runtimes of the agent.
const (
	RuntimeEmbedded = "embedded" // etcd in the agent's process
	RuntimeExec     = "exec"     // an etcd binary as the agent's child
	RuntimeSystemd  = "systemd"  // etcd.service, started through systemd (NixOS module)
)

// DefaultPrefix is where nico keeps everything in etcd unless configured
// otherwise.
const DefaultPrefix = "/nico/v1/"

// Agent is the configuration of nico-agent.
type Agent struct {
	Name      string   // "name": this machine's name, a DNS label
	Roles     []string // "roles": RoleControlPlane and/or RoleWorker
	Bootstrap bool     // "bootstrap": start a new etcd cluster here
	Labels    []string // "labels": key=value labels of this machine; topology=<domain> names its failure domain
	DataDir   string   // "dataDir": the agent's state directory
	Etcd      Etcd
	Store     Store
	Heartbeat Heartbeat
	Join      Join
	Log       Log
	// Generations: see generations.go.
	Generations Generations
	// Gossip and TokenFile: see gossip.go.
	Gossip    Gossip
	TokenFile string
	// Hypervisor: see hypervisor.go.
	Hypervisor Hypervisor
	// PKI: see tls.go.
	PKI PKI
	// JoinEndpoint: see joinendpoint.go.
	JoinEndpoint JoinEndpoint
	// Metrics: see metrics.go.
	Metrics Metrics
	// ComponentProbes: see componentprobes.go.
	ComponentProbes ComponentProbes
	// Drain and KubeconfigPublish: see clusterhooks.go.
	Drain             Drain
	KubeconfigPublish KubeconfigPublish
	// Recovery: see recovery.go.
	Recovery Recovery
	// Objects: see objects.go.
	Objects Objects
}

// LabelMap returns the machine's labels as a map.
func (a Agent) LabelMap() map[string]string { return labelMap(a.Labels) }

// HasRole reports whether the machine has role r.
func (a Agent) HasRole(r string) bool { return slices.Contains(a.Roles, r) }

// Etcd is how the agent runs its local etcd member and reaches the cluster.
type Etcd struct {
	Runtime string // "etcd.runtime": RuntimeEmbedded or RuntimeExec
	Binary  string // "etcd.binary": the etcd binary of RuntimeExec
	// Binaries ("etcd.binaries") are further etcd binaries RuntimeExec may
	// run, by path; the agent asks each its version (etcd --version) and
	// runs the one of the version the leader asks for its node (the
	// EtcdCluster's spec.version, rolled one node at a time).
	Binaries     []string
	Unit         string        // "etcd.unit": the systemd unit of RuntimeSystemd
	EnvFile      string        // "etcd.environmentFile": written for the unit by RuntimeSystemd
	DataDir      string        // "etcd.dataDir": the member's data; <dataDir>/etcd when unset
	PeerURL      string        // "etcd.peerURL"
	ClientURL    string        // "etcd.clientURL"
	Endpoints    []string      // "etcd.endpoints": client URLs of the running cluster
	ClusterToken string        // "etcd.clusterToken"
	DialTimeout  time.Duration // "etcd.dialTimeout"
}

// Store is where nico's objects live in etcd.
type Store struct {
	Prefix string // "store.prefix"
}

// Heartbeat is the machine's liveness lease.
type Heartbeat struct {
	TTL time.Duration // "heartbeat.ttl": whole seconds
}

// Join paces the join of a new member.
type Join struct {
	RetryInterval time.Duration // "join.retryInterval"
}

// Log is how a program logs; see package logging.
type Log struct {
	Level  string // "log.level": debug, info, warn or error
	Format string // "log.format": text or json
}

// AgentFlags registers every key of the agent as a flag on fs, plus
// --config.
func AgentFlags(fs *pflag.FlagSet) {
	keys, _ := agentKeys(new(Agent))
	addFlags(fs, keys)
}

// LoadAgent loads and validates the agent's configuration from fs (already
// parsed; it may be nil), the environment, the config file and the
// defaults.
func LoadAgent(fs *pflag.FlagSet) (Agent, error) {
	var a Agent
	keys, rules := agentKeys(&a)
	if err := load(fs, keys, rules); err != nil {
		return Agent{}, err
	}
	if a.Etcd.DataDir == "" {
		a.Etcd.DataDir = filepath.Join(a.DataDir, "etcd")
	}
	a.PKI.withDefaults(a.DataDir)
	a.JoinEndpoint.withDefaults(a.Gossip.Seeds)
	return a, nil
}

// agentKeys is the agent's table of keys, bound to the fields of a.
func agentKeys(a *Agent) ([]key, []rule) {
	keys := []key{
		stringKey("name", &a.Name, hostname(), "this machine's name in nico, a DNS label; defaults to the short host name", dnsLabel),
		listKey("roles", &a.Roles, []string{RoleControlPlane}, "roles of this machine: controlPlane, worker, hypervisor",
			nonEmptyList("list at least one of controlPlane, worker"), each(oneOf(RoleControlPlane, RoleWorker, RoleHypervisor)), noDuplicates),
		listKey("labels", &a.Labels, nil, "labels of this machine in its Node, key=value; topology=<domain> names its failure domain, over which the coordinator spreads etcd voters", each(label), noDuplicates),
		boolKey("bootstrap", &a.Bootstrap, false, "start a new etcd cluster on this machine; set it on one control-plane machine only, once"),
		stringKey("dataDir", &a.DataDir, "/var/lib/nico", "the agent's state directory", absPath(false)),
		stringKey("etcd.runtime", &a.Etcd.Runtime, RuntimeEmbedded, "how to run the local etcd member: embedded (in the agent), exec (the etcd binary as a child) or systemd (etcd.service, set up by the NixOS module)", runtime),
		stringKey("etcd.binary", &a.Etcd.Binary, "etcd", "the etcd binary, a path or a name on PATH, for runtime exec", notEmpty),
		listKey("etcd.binaries", &a.Etcd.Binaries, nil, "further etcd binaries, by path, that runtime exec may run when the EtcdCluster's spec.version asks for their version (each is asked etcd --version)",
			each(absPath(false)), noDuplicates),
		stringKey("etcd.unit", &a.Etcd.Unit, "etcd.service", "the systemd unit that runs etcd, for runtime systemd", notEmpty),
		stringKey("etcd.environmentFile", &a.Etcd.EnvFile, "/run/nico/etcd.env", "the EnvironmentFile the agent writes for the etcd unit, for runtime systemd", absPath(false)),
		stringKey("etcd.dataDir", &a.Etcd.DataDir, "", "the etcd member's data directory; empty means <dataDir>/etcd", absPath(true)),
		stringKey("etcd.peerURL", &a.Etcd.PeerURL, "https://127.0.0.1:2380", "https URL on which this member talks to its peers (mutual TLS)", httpsURL("https://10.0.0.1:2380")),
		stringKey("etcd.clientURL", &a.Etcd.ClientURL, "https://127.0.0.1:2379", "https URL on which this member serves clients (mutual TLS)", httpsURL("https://10.0.0.1:2379")),
		listKey("etcd.endpoints", &a.Etcd.Endpoints, nil, "https client URLs of the running etcd cluster; may be left empty with gossip.seeds (the agent learns them from the mesh) or bootstrap",
			each(httpsURL("https://10.0.0.1:2379")), noDuplicates),
		stringKey("etcd.clusterToken", &a.Etcd.ClusterToken, "nico", "etcd's initial cluster token", notEmpty),
		durationKey("etcd.dialTimeout", &a.Etcd.DialTimeout, 5*time.Second, "how long to wait for an etcd connection", between(0, time.Minute, false)),
		stringKey("store.prefix", &a.Store.Prefix, DefaultPrefix, "nico's keyspace prefix in etcd", storePrefix),
		durationKey("heartbeat.ttl", &a.Heartbeat.TTL, 10*time.Second, "TTL of the machine's heartbeat lease, in whole seconds", between(2*time.Second, 5*time.Minute, true)),
		durationKey("join.retryInterval", &a.Join.RetryInterval, 2*time.Second, "pause between attempts to join the etcd cluster", positive),
		stringKey("log.level", &a.Log.Level, "info", "log level: debug, info, warn, error", oneOf(logging.Levels...)),
		stringKey("log.format", &a.Log.Format, "text", "log format: text, json", oneOf(logging.Formats...)),
	}
	keys = append(keys, generationKeys(&a.Generations)...)
	keys = append(keys, gossipKeys(&a.Gossip, &a.TokenFile, gossip.DefaultPort)...)
	keys = append(keys, hypervisorKeys(&a.Hypervisor)...)
	keys = append(keys, pkiKeys(&a.PKI)...)
	keys = append(keys, joinEndpointKeys(&a.JoinEndpoint)...)
	keys = append(keys, metricsKeys(&a.Metrics, DefaultAgentMetricsListen)...)
	keys = append(keys, componentProbeKeys(&a.ComponentProbes)...)
	keys = append(keys, clusterHookKeys(&a.Drain, &a.KubeconfigPublish)...)
	keys = append(keys, recoveryKeys(&a.Recovery)...)
	keys = append(keys, objectKeys(&a.Objects)...)
	rules := []rule{
		gossipRule(&a.Gossip, &a.TokenFile),
		metricsRule(&a.Metrics),
		pkiRule(&a.PKI),
		{keys: []string{"bootstrap", "roles"}, check: func() error {
			if a.Bootstrap && !a.HasRole(RoleControlPlane) {
				return fmt.Errorf("true is not accepted with roles %q; bootstrap starts an etcd member, so add role controlPlane or set bootstrap to false", a.Roles)
			}
			return nil
		}},
		{keys: []string{"etcd.endpoints", "bootstrap"}, check: func() error {
			if !a.Bootstrap && len(a.Etcd.Endpoints) == 0 && len(a.Gossip.Seeds) == 0 {
				return errors.New("[] is not accepted without gossip.seeds; list a seed of the gossip mesh (gossip.seeds) or the client URLs of the running etcd cluster, or set bootstrap on the machine that starts a new one")
			}
			return nil
		}},
	}
	return keys, append(rules, generationRules(&a.Generations)...)
}

// runtime accepts the etcd runtimes the agent has.
func runtime(v string) error {
	return oneOf(RuntimeEmbedded, RuntimeExec, RuntimeSystemd)(v)
}

// hostname is the default machine name: the host name up to its first dot,
// lower-cased, or "" when it cannot be read (the name check then asks for
// --name).
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	h, _, _ = strings.Cut(h, ".")
	return strings.ToLower(h)
}
