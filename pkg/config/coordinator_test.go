package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func loadCoordinator(t *testing.T, in input) (Coordinator, error) {
	t.Helper()
	return LoadCoordinator(in.apply(t, CoordinatorFlags))
}

func TestCoordinatorDefaults(t *testing.T) {
	c, err := loadCoordinator(t, input{args: []string{"--name=cp-1", "--etcd.endpoints=" + endpoint}})
	if err != nil {
		t.Fatalf("LoadCoordinator: %v", err)
	}
	want := Coordinator{
		Name:                   "cp-1",
		Etcd:                   EtcdClient{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second},
		Store:                  Store{Prefix: "/nico/v1/"},
		SessionTTL:             10 * time.Second,
		LearnerStartTimeout:    2 * time.Minute,
		LearnerProgressTimeout: 2 * time.Minute,
		HealthTimeout:          2 * time.Second,
		ResyncInterval:         time.Second,
		Log:                    Log{Level: "info", Format: "text"},
		Gossip:                 Gossip{Bind: "0.0.0.0", Port: "7947", Profile: "lan"},
		TLS:                    TLS{CAFile: "/var/lib/nico/pki/ca.crt", CertFile: "/var/lib/nico/pki/coordinator.crt", KeyFile: "/var/lib/nico/pki/coordinator.key"},
		Metrics:                Metrics{Listen: DefaultCoordinatorMetricsListen},
		StatusPage:             StatusPage{Listen: DefaultStatusPageListen},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("LoadCoordinator =\n%+v\nwant\n%+v", c, want)
	}
}

func TestCoordinatorFileEnvFlag(t *testing.T) {
	c, err := loadCoordinator(t, input{
		file: `
name: cp-2
etcd: {endpoints: [https://10.0.0.1:2379, https://10.0.0.2:2379], dialTimeout: 1s}
coordinator:
  sessionTTL: 15s
  learnerStartTimeout: 5m
  learnerProgressTimeout: 3m
  healthTimeout: 500ms
  resyncInterval: 3s
log: {level: warn, format: json}
clusters: {defaultGitRepo: https://git.example/fleet}
`,
		env:  map[string]string{"NICO_COORDINATOR_SESSIONTTL": "20s", "NICO_COORDINATOR_HEALTHTIMEOUT": "1s"},
		args: []string{"--coordinator.healthTimeout=3s"},
	})
	if err != nil {
		t.Fatalf("LoadCoordinator: %v", err)
	}
	if c.Name != "cp-2" || len(c.Etcd.Endpoints) != 2 || c.Etcd.DialTimeout != time.Second ||
		c.SessionTTL != 20*time.Second || c.LearnerStartTimeout != 5*time.Minute ||
		c.LearnerProgressTimeout != 3*time.Minute || c.HealthTimeout != 3*time.Second ||
		c.ResyncInterval != 3*time.Second || c.Log != (Log{Level: "warn", Format: "json"}) ||
		c.DefaultGitRepo != "https://git.example/fleet" {
		t.Errorf("LoadCoordinator = %+v", c)
	}
}

func TestCoordinatorInvalidValues(t *testing.T) {
	const base = "name: cp-1\netcd: {endpoints: [" + endpoint + "]}\n"
	tests := []struct {
		env, value string
		wants      []string
	}{
		{"NICO_NAME", "CP1", []string{"config: name:", `"CP1"`, "DNS label"}},
		{"NICO_ETCD_ENDPOINTS", "10.0.0.1:2379", []string{"etcd.endpoints:", `"10.0.0.1:2379"`, "https URL"}},
		{"NICO_ETCD_DIALTIMEOUT", "90s", []string{"etcd.dialTimeout:", "1m30s", "at most 1m"}},
		{"NICO_STORE_PREFIX", "nico", []string{"store.prefix:", `"nico"`, "starts and ends with /"}},
		{"NICO_COORDINATOR_SESSIONTTL", "1500ms", []string{"coordinator.sessionTTL:", "1.5s", "whole seconds from 2s to 5m"}},
		{"NICO_COORDINATOR_SESSIONTTL", "10m", []string{"coordinator.sessionTTL:", "10m", "from 2s to 5m"}},
		{"NICO_COORDINATOR_LEARNERSTARTTIMEOUT", "500ms", []string{"coordinator.learnerStartTimeout:", "500ms", "at least 1s"}},
		{"NICO_COORDINATOR_LEARNERPROGRESSTIMEOUT", "0s", []string{"coordinator.learnerProgressTimeout:", "0s", "at least 1s"}},
		{"NICO_COORDINATOR_HEALTHTIMEOUT", "50ms", []string{"coordinator.healthTimeout:", "50ms", "from 100ms to 30s"}},
		{"NICO_COORDINATOR_HEALTHTIMEOUT", "1m", []string{"coordinator.healthTimeout:", "1m", "from 100ms to 30s"}},
		{"NICO_COORDINATOR_RESYNCINTERVAL", "0s", []string{"coordinator.resyncInterval:", "0s", "above 0"}},
		{"NICO_COORDINATOR_RESYNCINTERVAL", "often", []string{"coordinator.resyncInterval:", `"often"`, "duration with a unit"}},
		{"NICO_LOG_LEVEL", "all", []string{"log.level:", `"all"`, "debug, info, warn, error"}},
		{"NICO_LOG_FORMAT", "logfmt", []string{"log.format:", `"logfmt"`, "text, json"}},
		{"NICO_CLUSTERS_DEFAULTGITREPO", " https://git.example/fleet", []string{"clusters.defaultGitRepo:", `" https://git.example/fleet"`, "leading or trailing space"}},
	}
	for _, tt := range tests {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			_, err := loadCoordinator(t, input{file: base, env: map[string]string{tt.env: tt.value}})
			wantErr(t, err, tt.wants...)
			if keys := keyErrors(err); len(keys) != 1 {
				t.Errorf("errors on keys %q, want exactly one", keys)
			}
		})
	}
}

func TestCoordinatorNeedsEndpoints(t *testing.T) {
	_, err := loadCoordinator(t, input{args: []string{"--name=cp-1"}})
	wantErr(t, err, "config: etcd.endpoints: [] is not accepted without gossip.seeds", "list the client URLs")
}

// TestCoordinatorSeedsReplaceEndpoints: like the agent, a coordinator with
// a gossip seed needs no etcd.endpoints; it learns them from the mesh.
func TestCoordinatorSeedsReplaceEndpoints(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := loadCoordinator(t, input{args: []string{"--name=cp-2", "--gossip.seeds=127.0.0.1:7946", "--tokenFile=" + token}})
	if err != nil {
		t.Fatalf("a coordinator with a seed and no etcd.endpoints: %v", err)
	}
	if len(c.Etcd.Endpoints) != 0 || !c.Gossip.Enabled(c.TokenFile) {
		t.Fatalf("endpoints %v, gossip %+v", c.Etcd.Endpoints, c.Gossip)
	}
}

func TestCoordinatorUnknownKey(t *testing.T) {
	// heartbeat.ttl is an agent key, not a coordinator key.
	_, err := loadCoordinator(t, input{args: []string{"--name=cp-1", "--etcd.endpoints=" + endpoint},
		file: "heartbeat: {ttl: 10s}\ncoordinator: {sessionTTl: 10s, leaseTTL: 5s}\n"})
	wantErr(t, err, "config: heartbeat.ttl: unknown key", "config: coordinator.leasettl: unknown key")
	if keys := keyErrors(err); len(keys) != 2 {
		t.Errorf("errors on %q, want 2", keys)
	}
}

// TestMetricsBeyondLoopbackNeedsTLS: metrics.listen on loopback needs
// nothing more; any other address is refused without the three TLS files,
// naming the key, the value and what to give.
func TestMetricsBeyondLoopbackNeedsTLS(t *testing.T) {
	for _, tc := range []struct {
		listen string
		tls    bool
		ok     bool
	}{
		{"127.0.0.1:9480", false, true},
		{"localhost:9480", false, true},
		{"[::1]:9480", false, true},
		{"", false, true},
		{"0.0.0.0:9480", false, false},
		{":9480", false, false},
		{"10.0.0.1:9480", true, true},
	} {
		m := Metrics{Listen: tc.listen}
		if tc.tls {
			m.CertFile, m.KeyFile, m.ClientCAFile = "/a.crt", "/a.key", "/ca.crt"
		}
		err := metricsRule(&m).check()
		if (err == nil) != tc.ok {
			t.Errorf("metrics.listen %q (tls %v): err %v, want ok %v", tc.listen, tc.tls, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "metrics.tls.certFile") {
			t.Errorf("error %q does not name metrics.tls.certFile", err)
		}
	}
}
