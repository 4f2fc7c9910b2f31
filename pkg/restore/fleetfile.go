package restore

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/member"
	"gopkg.in/yaml.v3"
)

// FleetFile is the YAML file that names the members nicoctl restore and
// recover run themselves (the hosts' agents stopped):
//
//	etcd: /run/current-system/sw/bin/etcd   # empty: etcd embedded in nicoctl
//	clusterToken: nico-restored             # empty: the operation's name
//	tls: {caFile: ..., certFile: ..., keyFile: ...}   # nicoctl's client identity
//	members:
//	  - name: cp-1
//	    dataDir: /var/lib/nico/etcd
//	    peerURL: https://10.0.0.1:2380
//	    clientURL: https://10.0.0.1:2379
//	    tls: {trustedCAFile: ..., serverCertFile: ..., serverKeyFile: ..., peerCertFile: ..., peerKeyFile: ...}
type FleetFile struct {
	Etcd         string `yaml:"etcd"`
	ClusterToken string `yaml:"clusterToken"`
	TLS          struct {
		CAFile   string `yaml:"caFile"`
		CertFile string `yaml:"certFile"`
		KeyFile  string `yaml:"keyFile"`
	} `yaml:"tls"`
	Members []struct {
		Name      string `yaml:"name"`
		DataDir   string `yaml:"dataDir"`
		PeerURL   string `yaml:"peerURL"`
		ClientURL string `yaml:"clientURL"`
		TLS       *struct {
			TrustedCAFile  string `yaml:"trustedCAFile"`
			ServerCertFile string `yaml:"serverCertFile"`
			ServerKeyFile  string `yaml:"serverKeyFile"`
			PeerCertFile   string `yaml:"peerCertFile"`
			PeerKeyFile    string `yaml:"peerKeyFile"`
		} `yaml:"tls"`
	} `yaml:"members"`
}

// LoadFleet reads a FleetFile into a LocalFleet whose members run under
// the runtime the file names. Errors name the field and what is accepted.
func LoadFleet(path, token string, log *slog.Logger) (*LocalFleet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("restore: --fleet: %w", err)
	}
	var ff FleetFile
	if err := yaml.Unmarshal(b, &ff); err != nil {
		return nil, fmt.Errorf("restore: --fleet %s: %w", path, err)
	}
	if len(ff.Members) == 0 {
		return nil, fmt.Errorf("restore: --fleet %s: members is empty, want the control-plane members (name, dataDir, peerURL, clientURL)", path)
	}
	f := &LocalFleet{ClusterToken: ff.ClusterToken, Log: log}
	if f.ClusterToken == "" {
		f.ClusterToken = token
	}
	seen := map[string]bool{}
	var eps []string
	for i, m := range ff.Members {
		if m.Name == "" || m.DataDir == "" || m.PeerURL == "" || m.ClientURL == "" || seen[m.Name] {
			return nil, fmt.Errorf("restore: --fleet %s: members[%d] %q: want a unique name, a dataDir, a peerURL and a clientURL", path, i, m.Name)
		}
		seen[m.Name] = true
		var rt member.Runtime = member.NewEmbedded()
		if ff.Etcd != "" {
			rt = member.NewExec(ff.Etcd)
		}
		lm := &LocalMember{Name: m.Name, DataDir: m.DataDir, PeerURL: m.PeerURL, ClientURL: m.ClientURL, Runtime: rt}
		if m.TLS != nil {
			lm.TLS = &member.TLS{TrustedCAFile: m.TLS.TrustedCAFile, ServerCertFile: m.TLS.ServerCertFile, ServerKeyFile: m.TLS.ServerKeyFile,
				PeerCertFile: m.TLS.PeerCertFile, PeerKeyFile: m.TLS.PeerKeyFile, ClientCertAuth: true, PeerClientCertAuth: true}
		}
		f.Members = append(f.Members, lm)
		eps = append(eps, m.ClientURL)
	}
	tlsCfg, err := etcdclient.Files{CA: ff.TLS.CAFile, Cert: ff.TLS.CertFile, Key: ff.TLS.KeyFile}.Load(eps)
	if err != nil {
		return nil, fmt.Errorf("restore: --fleet %s: tls: %w", path, err)
	}
	f.ClientTLS = tlsCfg
	return f, nil
}

// Names are the members' node names, in the file's order.
func (f *LocalFleet) Names() []string {
	out := make([]string, 0, len(f.Members))
	for _, m := range f.Members {
		out = append(out, m.Name)
	}
	return out
}

// URLs maps each member's node name to its client URL.
func (f *LocalFleet) URLs() map[string]string {
	out := map[string]string{}
	for _, m := range f.Members {
		out[m.Name] = m.ClientURL
	}
	return out
}

// Close stops every member this process runs (nicoctl hands them back to
// the agents when it ends).
func (f *LocalFleet) Close() {
	for _, m := range f.Members {
		_ = m.Runtime.Stop(context.Background())
	}
}
