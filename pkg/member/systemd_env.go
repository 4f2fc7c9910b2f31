package member

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Environment is the EnvironmentFile the Systemd runtime writes for
// etcd.service: the member's identity, the initial-cluster values the
// coordinator returned, the database quota (Config.QuotaBackendBytes) and, with Config.TLS, its certificate files and
// client/peer certificate authentication (ETCD_CERT_FILE, ...). Listen URLs
// and tuning stay in the unit (the NixOS module sets them through
// services.etcd, https when TLS is on); systemd gives the file precedence
// over the unit's Environment=.
func Environment(cfg Config) map[string]string {
	env := map[string]string{
		"ETCD_NAME":                        cfg.Name,
		"ETCD_DATA_DIR":                    cfg.DataDir,
		"ETCD_INITIAL_CLUSTER":             cfg.InitialCluster,
		"ETCD_INITIAL_CLUSTER_STATE":       cfg.ClusterState,
		"ETCD_INITIAL_CLUSTER_TOKEN":       cfg.ClusterToken,
		"ETCD_INITIAL_ADVERTISE_PEER_URLS": cfg.PeerURL,
		"ETCD_ADVERTISE_CLIENT_URLS":       cfg.ClientURL,
	}
	if cfg.QuotaBackendBytes > 0 {
		env["ETCD_QUOTA_BACKEND_BYTES"] = strconv.FormatInt(cfg.QuotaBackendBytes, 10)
	}
	if cfg.TLS != nil {
		for k, v := range cfg.TLS.env() {
			env[k] = v
		}
	}
	return env
}

// envKeys is the order in which the file lists Environment's keys.
var envKeys = []string{
	"ETCD_NAME", "ETCD_DATA_DIR", "ETCD_INITIAL_CLUSTER", "ETCD_INITIAL_CLUSTER_STATE",
	"ETCD_INITIAL_CLUSTER_TOKEN", "ETCD_INITIAL_ADVERTISE_PEER_URLS", "ETCD_ADVERTISE_CLIENT_URLS",
	"ETCD_QUOTA_BACKEND_BYTES",
}

// WriteEnvironmentFile writes Environment(cfg) to path atomically (a
// temporary file renamed over it), mode 0600, creating its directory.
// Values with a newline, quote, backslash or blank are refused: systemd
// would read them differently.
func WriteEnvironmentFile(path string, cfg Config) error {
	env := Environment(cfg)
	var b strings.Builder
	b.WriteString("# Written by nico-agent for etcd.service; do not edit.\n")
	for _, k := range slices.Concat(envKeys, tlsEnvKeys) {
		v := env[k]
		if v == "" {
			continue
		}
		if strings.ContainsAny(v, "\n\r\"'\\ \t") {
			return fmt.Errorf("member: environment file: %s=%q has a character systemd would unquote, want a plain value", k, v)
		}
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("member: environment file: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("member: environment file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("member: environment file: %w", err)
	}
	return nil
}

// ReadEnvironmentFile reads a file written by WriteEnvironmentFile (plain
// KEY=value lines, # comments), as systemd would.
func ReadEnvironmentFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("member: environment file: %w", err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("member: environment file %s:%d: %q is not KEY=value", path, n, line)
		}
		env[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("member: environment file: %w", err)
	}
	return env, nil
}

// TLSFromEnvironment reads back the TLS settings Environment wrote, as etcd
// would from its environment: nil when ETCD_CERT_FILE is unset. The
// readiness client's files are not in the environment.
func TLSFromEnvironment(env map[string]string) (*TLS, error) {
	if env["ETCD_CERT_FILE"] == "" {
		return nil, nil
	}
	if ca, peerCA := env["ETCD_TRUSTED_CA_FILE"], env["ETCD_PEER_TRUSTED_CA_FILE"]; ca != peerCA {
		return nil, fmt.Errorf("member: environment: ETCD_TRUSTED_CA_FILE %q and ETCD_PEER_TRUSTED_CA_FILE %q differ, want one CA", ca, peerCA)
	}
	t := &TLS{
		TrustedCAFile:  env["ETCD_TRUSTED_CA_FILE"],
		ServerCertFile: env["ETCD_CERT_FILE"],
		ServerKeyFile:  env["ETCD_KEY_FILE"],
		PeerCertFile:   env["ETCD_PEER_CERT_FILE"],
		PeerKeyFile:    env["ETCD_PEER_KEY_FILE"],
	}
	for key, dst := range map[string]*bool{"ETCD_CLIENT_CERT_AUTH": &t.ClientCertAuth, "ETCD_PEER_CLIENT_CERT_AUTH": &t.PeerClientCertAuth} {
		v, err := strconv.ParseBool(env[key])
		if err != nil {
			return nil, fmt.Errorf("member: environment: %s=%q, want true or false", key, env[key])
		}
		*dst = v
	}
	return t, t.validate()
}
