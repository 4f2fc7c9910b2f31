package config

import (
	"errors"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/logging"
	"github.com/spf13/pflag"
)

// Coordinator is the configuration of nico-coordinator.
type Coordinator struct {
	Name       string // "name": this candidate's identity in the election
	Etcd       EtcdClient
	Store      Store
	SessionTTL time.Duration // "coordinator.sessionTTL": whole seconds
	// The membership settings below (learner timeouts, health timeout,
	// dead-member replacement) are only the bootstrap defaults of the
	// EtcdCluster's spec.policy: the leader that finds no EtcdCluster writes
	// them into the first one; from then on the object decides (change it
	// with nicoctl apply).

	// LearnerStartTimeout: a learner that never starts is removed after it
	// ("coordinator.learnerStartTimeout").
	LearnerStartTimeout time.Duration
	// LearnerProgressTimeout: a learner that stops catching up is removed
	// after it ("coordinator.learnerProgressTimeout").
	LearnerProgressTimeout time.Duration
	// HealthTimeout bounds each member status call
	// ("coordinator.healthTimeout").
	HealthTimeout time.Duration
	// ResyncInterval is how often state is re-read besides the watches
	// ("coordinator.resyncInterval").
	ResyncInterval time.Duration
	Log            Log
	// ReplaceDeadMembersAfter: file the removal of a voter dead this long,
	// 0 never ("coordinator.replaceDeadMembersAfter").
	ReplaceDeadMembersAfter time.Duration
	// Gossip and TokenFile: see gossip.go; the candidate joins the mesh
	// when set, and takes node liveness from it.
	Gossip    Gossip
	TokenFile string
	// TLS is the coordinator's client certificate (tls.go).
	TLS TLS
	// Metrics: see metrics.go.
	Metrics Metrics
	// StatusPage: see statuspage.go.
	StatusPage StatusPage
	// DefaultGitRepo is the flake repository of a KubernetesCluster whose
	// spec.gitRepo is empty ("clusters.defaultGitRepo").
	DefaultGitRepo string
}

// EtcdClient is how a program reaches the etcd cluster.
type EtcdClient struct {
	Endpoints   []string      // "etcd.endpoints"
	DialTimeout time.Duration // "etcd.dialTimeout"
}

// bootstrapDefault is the help text's note on a membership setting that
// is the bootstrap default of spec.policy.field.
func bootstrapDefault(field string) string {
	return "the bootstrap default of EtcdCluster spec.policy." + field + "; once the object exists, change it with nicoctl apply"
}

// CoordinatorFlags registers every key of the coordinator as a flag on fs,
// plus --config.
func CoordinatorFlags(fs *pflag.FlagSet) {
	keys, _ := coordinatorKeys(new(Coordinator))
	addFlags(fs, keys)
}

// LoadCoordinator loads and validates the coordinator's configuration from
// fs (already parsed; it may be nil), the environment, the config file and
// the defaults.
func LoadCoordinator(fs *pflag.FlagSet) (Coordinator, error) {
	var c Coordinator
	keys, rules := coordinatorKeys(&c)
	if err := load(fs, keys, rules); err != nil {
		return Coordinator{}, err
	}
	return c, nil
}

// coordinatorKeys is the coordinator's table of keys, bound to the fields
// of c.
func coordinatorKeys(c *Coordinator) ([]key, []rule) {
	keys := []key{
		stringKey("name", &c.Name, hostname(), "this candidate's identity in the leader election, a DNS label; defaults to the short host name", dnsLabel),
		listKey("etcd.endpoints", &c.Etcd.Endpoints, nil, "https client URLs of the etcd cluster; empty means learned from the gossip mesh (gossip.seeds), as the agent does",
			each(httpsURL("https://10.0.0.1:2379")), noDuplicates),
		durationKey("etcd.dialTimeout", &c.Etcd.DialTimeout, 5*time.Second, "how long to wait for an etcd connection", between(0, time.Minute, false)),
		stringKey("store.prefix", &c.Store.Prefix, DefaultPrefix, "nico's keyspace prefix in etcd", storePrefix),
		durationKey("coordinator.sessionTTL", &c.SessionTTL, 10*time.Second, "TTL of the leader's election session, in whole seconds", between(2*time.Second, 5*time.Minute, true)),
		durationKey("coordinator.learnerStartTimeout", &c.LearnerStartTimeout, 2*time.Minute, "remove a learner that has not started after this long; "+bootstrapDefault("learnerStartTimeout"), between(api.MinLearnerTimeout, 0, false)),
		durationKey("coordinator.learnerProgressTimeout", &c.LearnerProgressTimeout, 2*time.Minute, "remove a learner that has stopped catching up for this long; "+bootstrapDefault("learnerProgressTimeout"), between(api.MinLearnerTimeout, 0, false)),
		durationKey("coordinator.healthTimeout", &c.HealthTimeout, 2*time.Second, "timeout of each member status call; "+bootstrapDefault("healthTimeout"), between(api.MinHealthTimeout, api.MaxHealthTimeout, false)),
		durationKey("coordinator.resyncInterval", &c.ResyncInterval, time.Second, "how often to re-read the cluster besides watching it", positive),
		stringKey("log.level", &c.Log.Level, "info", "log level: debug, info, warn, error", oneOf(logging.Levels...)),
		stringKey("log.format", &c.Log.Format, "text", "log format: text, json", oneOf(logging.Formats...)),
		stringKey("clusters.defaultGitRepo", &c.DefaultGitRepo, "", "the flake repository of a KubernetesCluster whose spec.gitRepo is empty; empty: such a cluster waits for one", noSpaceAround),
		durationKey("coordinator.replaceDeadMembersAfter", &c.ReplaceDeadMembersAfter, 0, "file the removal of a voter whose node has been dead (gossip and lease) this long, if quorum allows; 0 never does; "+bootstrapDefault("replaceDeadMembersAfter"), offOrAtLeast(api.MinReplaceDeadMembersAfter)),
	}
	keys = append(keys, gossipKeys(&c.Gossip, &c.TokenFile, CoordinatorGossipPort)...)
	keys = append(keys, tlsKeys(&c.TLS, "coordinator")...)
	keys = append(keys, metricsKeys(&c.Metrics, DefaultCoordinatorMetricsListen)...)
	keys = append(keys, statusPageKeys(&c.StatusPage)...)
	return keys, []rule{gossipRule(&c.Gossip, &c.TokenFile), metricsRule(&c.Metrics), statusPageRule(&c.StatusPage), {keys: []string{"etcd.endpoints", "gossip.seeds"}, check: func() error {
		if len(c.Etcd.Endpoints) == 0 && len(c.Gossip.Seeds) == 0 {
			return errors.New("[] is not accepted without gossip.seeds; list the client URLs of the etcd cluster, e.g. https://10.0.0.1:2379, or a seed of the gossip mesh (gossip.seeds) to learn them from")
		}
		return nil
	}}}
}
