package config

import (
	"errors"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

const endpoint = "https://10.0.0.1:2379"

func TestAgentDefaults(t *testing.T) {
	a, err := loadAgent(t, input{args: []string{"--name=cp-1", "--etcd.endpoints=" + endpoint}})
	if err != nil {
		t.Fatalf("LoadAgent: %v", err)
	}
	want := Agent{
		Name:    "cp-1",
		Roles:   []string{"controlPlane"},
		DataDir: "/var/lib/nico",
		Etcd: Etcd{
			Runtime:      "embedded",
			Binary:       "etcd",
			Unit:         "etcd.service",
			EnvFile:      "/run/nico/etcd.env",
			DataDir:      "/var/lib/nico/etcd",
			PeerURL:      "https://127.0.0.1:2380",
			ClientURL:    "https://127.0.0.1:2379",
			Endpoints:    []string{endpoint},
			ClusterToken: "nico",
			DialTimeout:  5 * time.Second,
		},
		Store:             Store{Prefix: "/nico/v1/"},
		Heartbeat:         Heartbeat{TTL: 10 * time.Second},
		Join:              Join{RetryInterval: 2 * time.Second},
		Log:               Log{Level: "info", Format: "text"},
		Generations:       Generations{Applier: "none", SecretsDir: "/run/nico/secrets", HealthDeadline: 2 * time.Minute, AgentPathFile: "/etc/nico/agent-path", HostFileRoots: DefaultHostFileRoots},
		Gossip:            Gossip{Bind: "0.0.0.0", Port: "7946", Profile: "lan"},
		Hypervisor:        Hypervisor{URI: "qemu:///system", StopGrace: 30 * time.Second, Resync: 5 * time.Second, DomainType: "auto", BootTimeout: 5 * time.Minute},
		PKI:               PKI{Dir: "/var/lib/nico/pki"},
		JoinEndpoint:      JoinEndpoint{Listen: ":7950"},
		Metrics:           Metrics{Listen: DefaultAgentMetricsListen},
		Drain:             Drain{Resync: DefaultDrainResync, OutputTail: DefaultDrainOutputTail},
		KubeconfigPublish: KubeconfigPublish{Interval: DefaultKubeconfigPublishInterval},
		Recovery:          Recovery{Listen: ":7951"},
	}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("LoadAgent =\n%+v\nwant\n%+v", a, want)
	}
}

func TestAgentHypervisorKeys(t *testing.T) {
	a, err := loadAgent(t, input{args: []string{"--name=hv-1", "--etcd.endpoints=" + endpoint, "--roles=hypervisor", "--hypervisor.labels=rack=a,gpu=no", "--hypervisor.uri=test:///default"}})
	if err != nil {
		t.Fatal(err)
	}
	if !a.HasRole(RoleHypervisor) || a.Hypervisor.URI != "test:///default" || !reflect.DeepEqual(a.Hypervisor.LabelMap(), map[string]string{"rack": "a", "gpu": "no"}) {
		t.Fatalf("hypervisor %+v", a.Hypervisor)
	}
	_, err = loadAgent(t, input{args: []string{"--name=hv-1", "--etcd.endpoints=" + endpoint, "--hypervisor.labels=rack"}})
	if err == nil || !strings.Contains(err.Error(), "hypervisor.labels") || !strings.Contains(err.Error(), "key=value") {
		t.Fatalf("bad label: %v", err)
	}
}

// TestAgentLabels: labels are key=value pairs (topology names the failure
// domain); a bare word is refused naming the key.
func TestAgentLabels(t *testing.T) {
	a, err := loadAgent(t, input{args: []string{"--name=cp-1", "--etcd.endpoints=" + endpoint, "--labels=topology=rack-a,disk=ssd"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.LabelMap(); !reflect.DeepEqual(got, map[string]string{"topology": "rack-a", "disk": "ssd"}) {
		t.Fatalf("labels %v", got)
	}
	_, err = loadAgent(t, input{args: []string{"--name=cp-1", "--etcd.endpoints=" + endpoint, "--labels=rack"}})
	if err == nil || !strings.Contains(err.Error(), "labels") || !strings.Contains(err.Error(), "key=value") {
		t.Fatalf("bad label: %v", err)
	}
}

func TestAgentNameDefaultsToHostname(t *testing.T) {
	h := hostname()
	if dnsLabel(h) != nil {
		t.Skipf("host name %q is not a DNS label", h)
	}
	a, err := loadAgent(t, input{args: []string{"--bootstrap"}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != h {
		t.Errorf("Name = %q, want the host name %q", a.Name, h)
	}
}

func TestAgentFile(t *testing.T) {
	a, err := loadAgent(t, input{file: `
name: cp-2
roles: [controlPlane, worker]
dataDir: /srv/nico
etcd:
  runtime: systemd
  binary: /run/current-system/sw/bin/etcd
  unit: etcd-main.service
  environmentFile: /run/nico/main.env
  dataDir: /srv/etcd
  peerURL: https://10.0.0.2:2380
  clientURL: https://10.0.0.2:2379
  endpoints:
    - https://10.0.0.1:2379
    - https://10.0.0.3:2379
  clusterToken: prod
  dialTimeout: 3s
store:
  prefix: /nico/test/
heartbeat:
  ttl: 30s
join:
  retryInterval: 500ms
log:
  level: debug
  format: json
generations:
  applier: exec
  command: [/bin/sh, -c, "echo $NICO_REVISION"]
  healthDeadline: 30s
  allowFailedUnits: ["user@*.service"]
  checkCommands: ["systemctl is-active kubelet"]
  httpChecks: ["http://127.0.0.1:10248/healthz"]
`})
	if err != nil {
		t.Fatalf("LoadAgent: %v", err)
	}
	want := Agent{
		Name:    "cp-2",
		Roles:   []string{"controlPlane", "worker"},
		DataDir: "/srv/nico",
		Etcd: Etcd{
			Runtime:      "systemd",
			Binary:       "/run/current-system/sw/bin/etcd",
			Unit:         "etcd-main.service",
			EnvFile:      "/run/nico/main.env",
			DataDir:      "/srv/etcd",
			PeerURL:      "https://10.0.0.2:2380",
			ClientURL:    "https://10.0.0.2:2379",
			Endpoints:    []string{"https://10.0.0.1:2379", "https://10.0.0.3:2379"},
			ClusterToken: "prod",
			DialTimeout:  3 * time.Second,
		},
		Store:     Store{Prefix: "/nico/test/"},
		Heartbeat: Heartbeat{TTL: 30 * time.Second},
		Join:      Join{RetryInterval: 500 * time.Millisecond},
		Log:       Log{Level: "debug", Format: "json"},
		Generations: Generations{Applier: "exec", Command: []string{"/bin/sh", "-c", "echo $NICO_REVISION"}, SecretsDir: "/run/nico/secrets", HealthDeadline: 30 * time.Second,
			AllowFailedUnits: []string{"user@*.service"}, CheckCommands: []string{"systemctl is-active kubelet"}, HTTPChecks: []string{"http://127.0.0.1:10248/healthz"}, AgentPathFile: "/etc/nico/agent-path", HostFileRoots: DefaultHostFileRoots},
		Gossip:            Gossip{Bind: "0.0.0.0", Port: "7946", Profile: "lan"},
		Hypervisor:        Hypervisor{URI: "qemu:///system", StopGrace: 30 * time.Second, Resync: 5 * time.Second, DomainType: "auto", BootTimeout: 5 * time.Minute},
		PKI:               PKI{Dir: "/srv/nico/pki"},
		JoinEndpoint:      JoinEndpoint{Listen: ":7950"},
		Metrics:           Metrics{Listen: DefaultAgentMetricsListen},
		Drain:             Drain{Resync: DefaultDrainResync, OutputTail: DefaultDrainOutputTail},
		KubeconfigPublish: KubeconfigPublish{Interval: DefaultKubeconfigPublishInterval},
		Recovery:          Recovery{Listen: ":7951"},
	}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("LoadAgent =\n%+v\nwant\n%+v", a, want)
	}
}

func TestAgentPrecedence(t *testing.T) {
	const file = "name: cp-1\nbootstrap: true\nheartbeat: {ttl: 20s}\nroles: [worker, controlPlane]\n"
	tests := []struct {
		name      string
		in        input
		wantTTL   time.Duration
		wantRoles []string
	}{
		{"default", input{args: []string{"--name=cp-1", "--bootstrap"}}, 10 * time.Second, []string{"controlPlane"}},
		{"file over default", input{file: file}, 20 * time.Second, []string{"worker", "controlPlane"}},
		{"env over file", input{file: file, env: map[string]string{"NICO_HEARTBEAT_TTL": "30s", "NICO_ROLES": "controlPlane, worker"}},
			30 * time.Second, []string{"controlPlane", "worker"}},
		{"flag over env", input{file: file, env: map[string]string{"NICO_HEARTBEAT_TTL": "30s", "NICO_ROLES": "worker"},
			args: []string{"--heartbeat.ttl=40s", "--roles=controlPlane"}}, 40 * time.Second, []string{"controlPlane"}},
		{"flag over default", input{args: []string{"--name=cp-1", "--bootstrap", "--heartbeat.ttl=40s"}}, 40 * time.Second, []string{"controlPlane"}},
		{"empty env is unset", input{file: file, env: map[string]string{"NICO_HEARTBEAT_TTL": ""}}, 20 * time.Second, []string{"worker", "controlPlane"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := loadAgent(t, tt.in)
			if err != nil {
				t.Fatalf("LoadAgent: %v", err)
			}
			if a.Heartbeat.TTL != tt.wantTTL || !slices.Equal(a.Roles, tt.wantRoles) {
				t.Errorf("ttl %v roles %q, want %v %q", a.Heartbeat.TTL, a.Roles, tt.wantTTL, tt.wantRoles)
			}
		})
	}
}

func TestAgentConfigFromEnv(t *testing.T) {
	in := input{file: "name: from-file\nbootstrap: true\n"}
	fs := in.apply(t, AgentFlags)
	// --config was not given: NICO_CONFIG names the file.
	t.Setenv("NICO_CONFIG", fs.Lookup("config").Value.String())
	if err := fs.Set("config", ""); err != nil {
		t.Fatal(err)
	}
	a, err := LoadAgent(fs)
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "from-file" {
		t.Errorf("Name = %q, want from-file", a.Name)
	}
}

// valid and validFile make every agent key valid, so that one bad value
// stands alone.
var valid = []string{"--name=cp-1", "--etcd.endpoints=" + endpoint}

const validFile = "name: cp-1\netcd: {endpoints: [" + endpoint + "]}\n"

func TestAgentInvalidValues(t *testing.T) {
	tests := []struct {
		env   string
		value string
		wants []string
	}{
		{"NICO_NAME", "Cp_1", []string{"config: name:", `"Cp_1"`, "DNS label"}},
		{"NICO_NAME", "-cp", []string{"name:", `"-cp"`, "DNS label"}},
		{"NICO_ROLES", "master", []string{"roles:", `"master"`, "one of controlPlane, worker"}},
		{"NICO_ROLES", "worker,worker", []string{"roles:", `"worker" is listed twice`}},
		{"NICO_ROLES", ",", []string{"roles:", "[]", "at least one of controlPlane, worker"}},
		{"NICO_BOOTSTRAP", "maybe", []string{"bootstrap:", `"maybe"`, "true or false"}},
		{"NICO_DATADIR", "var/lib/nico", []string{"dataDir:", `"var/lib/nico"`, "absolute path"}},
		{"NICO_ETCD_RUNTIME", "podman", []string{`config: etcd.runtime: "podman" is not accepted; use one of embedded, exec, systemd`}},
		{"NICO_ETCD_RUNTIME", "systemd", nil},
		{"NICO_GENERATIONS_APPLIER", "ansible", []string{`generations.applier: "ansible" is not accepted; use one of none, exec, nixos`}},
		{"NICO_GENERATIONS_APPLIER", "exec", []string{"generations.command:", "generations.applier exec"}},
		{"NICO_GENERATIONS_HTTPCHECKS", "localhost:80", []string{"generations.httpChecks:", `"localhost:80"`}},
		{"NICO_GENERATIONS_AGENTPATHFILE", "etc/nico/agent-path", []string{"generations.agentPathFile:", `"etc/nico/agent-path" is not accepted; use an absolute path`}},
		{"NICO_ETCD_ENVIRONMENTFILE", "etcd.env", []string{"etcd.environmentFile:", `"etcd.env"`, "absolute path"}},
		{"NICO_ETCD_DATADIR", "etcd", []string{"etcd.dataDir:", `"etcd"`, "absolute path"}},
		{"NICO_ETCD_PEERURL", "10.0.0.1:2380", []string{"etcd.peerURL:", `"10.0.0.1:2380"`, "https URL"}},
		{"NICO_ETCD_PEERURL", "https://10.0.0.1", []string{"etcd.peerURL:", "no port", "https URL with a host and a port"}},
		{"NICO_ETCD_PEERURL", "https://10.0.0.1:2380/x", []string{"etcd.peerURL:", "has a path"}},
		{"NICO_ETCD_PEERURL", "unix:///run/etcd.sock", []string{"etcd.peerURL:", "not https"}},
		{"NICO_ETCD_CLIENTURL", "http://10.0.0.1:99999", []string{"etcd.clientURL:", `"http://10.0.0.1:99999"`, "1 to 65535"}},
		{"NICO_ETCD_ENDPOINTS", endpoint + ",ftp://x:1", []string{"etcd.endpoints:", `"ftp://x:1"`, "https URL"}},
		{"NICO_ETCD_ENDPOINTS", endpoint + "," + endpoint, []string{"etcd.endpoints:", "listed twice"}},
		{"NICO_ETCD_BINARY", " ", nil}, // a blank name is a name; exec will report it
		{"NICO_ETCD_CLUSTERTOKEN", " ", nil},
		{"NICO_ETCD_DIALTIMEOUT", "2m", []string{"etcd.dialTimeout:", "2m is not accepted", "above 0 and at most 1m"}},
		{"NICO_ETCD_DIALTIMEOUT", "0s", []string{"etcd.dialTimeout:", "0s", "above 0"}},
		{"NICO_ETCD_DIALTIMEOUT", "soon", []string{"etcd.dialTimeout:", `"soon"`, "duration with a unit"}},
		{"NICO_STORE_PREFIX", "nico/", []string{"store.prefix:", `"nico/"`, "starts and ends with /"}},
		{"NICO_STORE_PREFIX", "/nico", []string{"store.prefix:", `"/nico"`, "starts and ends with /"}},
		{"NICO_HEARTBEAT_TTL", "2500ms", []string{"heartbeat.ttl:", "2.5s is not accepted", "whole seconds from 2s to 5m"}},
		{"NICO_HEARTBEAT_TTL", "1s", []string{"heartbeat.ttl:", "1s", "from 2s to 5m"}},
		{"NICO_HEARTBEAT_TTL", "6m", []string{"heartbeat.ttl:", "6m", "from 2s to 5m"}},
		{"NICO_JOIN_RETRYINTERVAL", "-1s", []string{"join.retryInterval:", "-1s", "above 0"}},
		{"NICO_LOG_LEVEL", "trace", []string{"log.level:", `"trace"`, "debug, info, warn, error"}},
		{"NICO_LOG_FORMAT", "xml", []string{"log.format:", `"xml"`, "text, json"}},
	}
	for _, tt := range tests {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			_, err := loadAgent(t, input{file: validFile, env: map[string]string{tt.env: tt.value}})
			if tt.wants == nil {
				if err != nil {
					t.Fatalf("LoadAgent: %v", err)
				}
				return
			}
			wantErr(t, err, tt.wants...)
			if keys := keyErrors(err); len(keys) != 1 {
				t.Errorf("errors on keys %q, want exactly one", keys)
			}
		})
	}
}

func TestAgentEmptyRequiredStrings(t *testing.T) {
	_, err := loadAgent(t, input{args: valid, file: "etcd: {binary: '', clusterToken: ''}\n"})
	wantErr(t, err, `etcd.binary: "" is not accepted`, `etcd.clusterToken: "" is not accepted`)
}

func TestAgentAllErrorsAtOnce(t *testing.T) {
	_, err := loadAgent(t, input{
		file: "roles: [worker]\nheartbeat: {ttl: 1s}\n",
		env:  map[string]string{"NICO_LOG_LEVEL": "loud", "NICO_ETCD_RUNTIME": "podman"},
		args: []string{"--name=Bad_Name", "--etcd.peerURL=localhost"},
	})
	t.Log(err)
	got := keyErrors(err)
	want := []string{"name", "etcd.runtime", "etcd.peerURL", "heartbeat.ttl", "log.level", "etcd.endpoints"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("errors on %q, want %q\n%v", got, want, err)
	}
}

func TestAgentFileTypes(t *testing.T) {
	_, err := loadAgent(t, input{args: valid, file: "heartbeat: {ttl: 10}\nbootstrap: 3\nroles: [1, worker]\n"})
	wantErr(t, err,
		"heartbeat.ttl: 10 is not accepted; use a duration with a unit",
		"bootstrap: 3 is not accepted; use true or false",
		"roles: item 1 is not accepted; use a list of strings")
}

func TestAgentUnknownKeys(t *testing.T) {
	_, err := loadAgent(t, input{args: valid, file: "etcd:\n  peerURLs: https://10.0.0.1:2380\nnmae: cp-1\ncolour: blue\n"})
	wantErr(t, err,
		"config: etcd.peerurls: unknown key in ", "did you mean etcd.peerURL?",
		"config: nmae: unknown key", "did you mean name?",
		"config: colour: unknown key")
	if !errors.Is(err, ErrUnknownKey) {
		t.Errorf("errors.Is(%v, ErrUnknownKey) = false", err)
	}
}

func TestAgentKeysIgnoreCase(t *testing.T) {
	a, err := loadAgent(t, input{args: valid, file: "ETCD:\n  PeerUrl: https://10.0.0.9:2380\n"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Etcd.PeerURL != "https://10.0.0.9:2380" {
		t.Errorf("PeerURL = %q", a.Etcd.PeerURL)
	}
}

func TestAgentEmptySection(t *testing.T) {
	if _, err := loadAgent(t, input{args: valid, file: "etcd:\nlog: {}\n"}); err != nil {
		t.Fatalf("LoadAgent: %v", err)
	}
}

func TestAgentMissingFile(t *testing.T) {
	flags := input{}.apply(t, AgentFlags)
	path := t.TempDir() + "/absent.yaml"
	if err := flags.Set("config", path); err != nil {
		t.Fatal(err)
	}
	_, err := LoadAgent(flags)
	wantErr(t, err, "config: read config file", path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("errors.Is(%v, fs.ErrNotExist) = false", err)
	}
}

func TestAgentBadYAML(t *testing.T) {
	_, err := loadAgent(t, input{file: "name: [unclosed\n"})
	wantErr(t, err, "nico.yaml")
}

func TestAgentBootstrapAndRoles(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		wants []string // nil: no error
	}{
		{"bootstrap control plane", []string{"--bootstrap"}, nil},
		{"bootstrap both roles", []string{"--bootstrap", "--roles=worker,controlPlane"}, nil},
		{"bootstrap worker only", []string{"--bootstrap", "--roles=worker"},
			[]string{"config: bootstrap: true is not accepted with roles", `"worker"`, "add role controlPlane"}},
		{"join needs endpoints", nil, []string{"config: etcd.endpoints: [] is not accepted", "set bootstrap"}},
		{"worker needs endpoints", []string{"--roles=worker"}, []string{"etcd.endpoints: [] is not accepted"}},
		{"join with endpoints", []string{"--etcd.endpoints=" + endpoint}, nil},
		{"bootstrap with endpoints", []string{"--bootstrap", "--etcd.endpoints=" + endpoint}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadAgent(t, input{args: append([]string{"--name=cp-1"}, tt.args...)})
			if tt.wants == nil {
				if err != nil {
					t.Fatalf("LoadAgent: %v", err)
				}
				return
			}
			wantErr(t, err, tt.wants...)
		})
	}
}

func TestAgentRuleSkippedWhenItsKeyIsBad(t *testing.T) {
	// A bad bootstrap value must not also claim that endpoints are missing.
	_, err := loadAgent(t, input{args: []string{"--name=cp-1"}, env: map[string]string{"NICO_BOOTSTRAP": "sure"}})
	if keys := keyErrors(err); !slices.Equal(keys, []string{"bootstrap"}) {
		t.Errorf("errors on %q, want only bootstrap: %v", keys, err)
	}
}

func TestAgentEtcdDataDir(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "/var/lib/nico/etcd"},
		{[]string{"--dataDir=/srv/nico"}, "/srv/nico/etcd"},
		{[]string{"--dataDir=/srv/nico", "--etcd.dataDir=/data/etcd"}, "/data/etcd"},
	}
	for _, tt := range tests {
		a, err := loadAgent(t, input{args: append(slices.Clone(valid), tt.args...)})
		if err != nil {
			t.Fatal(err)
		}
		if a.Etcd.DataDir != tt.want {
			t.Errorf("%q: etcd.dataDir = %q, want %q", tt.args, a.Etcd.DataDir, tt.want)
		}
	}
}
