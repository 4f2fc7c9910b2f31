package config

import (
	"path/filepath"
	"testing"
)

// rootTLS is nicoctl's default client certificate: root's.
var rootTLS = TLS{CAFile: "/var/lib/nico/pki/ca.crt", CertFile: "/var/lib/nico/pki/root.crt", KeyFile: "/var/lib/nico/pki/root.key"}

func TestAgentPKIKeys(t *testing.T) {
	a, err := loadAgent(t, input{args: []string{"--name=cp-1", "--bootstrap", "--dataDir=/srv/n",
		"--pki.caCertFile=/etc/ca/ca.crt", "--pki.caKeyFile=/etc/ca/ca.key"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (PKI{Dir: "/srv/n/pki", CACertFile: "/etc/ca/ca.crt", CAKeyFile: "/etc/ca/ca.key"}); a.PKI != want {
		t.Errorf("PKI = %+v, want %+v", a.PKI, want)
	}
	a, err = loadAgent(t, input{args: valid, env: map[string]string{"NICO_PKI_DIR": "/etc/nico/pki"}})
	if err != nil || a.PKI.Dir != "/etc/nico/pki" {
		t.Errorf("pki.dir from env: %+v, %v", a.PKI, err)
	}
}

func TestPKIAndTLSInvalidValues(t *testing.T) {
	tests := []struct {
		load  func(*testing.T, input) error
		env   map[string]string
		wants []string
	}{
		{agentErr, map[string]string{"NICO_PKI_DIR": "pki"}, []string{"config: pki.dir:", `"pki"`, "absolute path"}},
		{agentErr, map[string]string{"NICO_PKI_CACERTFILE": "ca.crt", "NICO_PKI_CAKEYFILE": "/ca.key"}, []string{"pki.caCertFile:", `"ca.crt"`, "absolute path"}},
		{agentErr, map[string]string{"NICO_PKI_CACERTFILE": "/ca.crt"}, []string{"config: pki.caCertFile:", `"/ca.crt"`, "without pki.caKeyFile"}},
		{agentErr, map[string]string{"NICO_PKI_CAKEYFILE": "/ca.key"}, []string{"config: pki.caCertFile:", `"/ca.key"`, "certificate file too"}},
		{coordinatorErr, map[string]string{"NICO_TLS_CAFILE": "ca.crt"}, []string{"config: tls.caFile:", `"ca.crt"`, "absolute path"}},
		{coordinatorErr, map[string]string{"NICO_TLS_CERTFILE": "./c.pem"}, []string{"config: tls.certFile:", `"./c.pem"`, "absolute path"}},
		{coordinatorErr, map[string]string{"NICO_TLS_KEYFILE": "k"}, []string{"config: tls.keyFile:", `"k"`, "absolute path"}},
	}
	for _, tt := range tests {
		t.Run(wantsName(tt.wants), func(t *testing.T) {
			err := tt.load(t, input{args: nil, env: tt.env})
			wantErr(t, err, tt.wants...)
			if keys := keyErrors(err); len(keys) != 1 {
				t.Errorf("errors on keys %q, want exactly one", keys)
			}
		})
	}
}

// TestCtlRelativeTLSPaths: nicoctl, run from a shell, takes certificate
// paths relative to the working directory and resolves them.
func TestCtlRelativeTLSPaths(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	c, err := loadCtl(t, input{env: map[string]string{"NICO_TLS_KEYFILE": "k", "NICO_TLS_CERTFILE": "./certs/c.pem"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "k"); c.TLS.KeyFile != want {
		t.Errorf("tls.keyFile = %q, want %q", c.TLS.KeyFile, want)
	}
	if want := filepath.Join(dir, "certs", "c.pem"); c.TLS.CertFile != want {
		t.Errorf("tls.certFile = %q, want %q", c.TLS.CertFile, want)
	}
}

func agentErr(t *testing.T, in input) error {
	in.args = append(in.args, valid...)
	_, err := loadAgent(t, in)
	return err
}

func coordinatorErr(t *testing.T, in input) error {
	in.args = append(in.args, "--name=cp-1", "--etcd.endpoints=https://10.0.0.1:2379")
	_, err := loadCoordinator(t, in)
	return err
}

func bootstrapAgentErr(t *testing.T, in input) error {
	in.args = append(in.args, "--name=cp-1", "--bootstrap")
	_, err := loadAgent(t, in)
	return err
}

func namedCoordinatorErr(t *testing.T, in input) error {
	in.args = append(in.args, "--name=cp-1")
	_, err := loadCoordinator(t, in)
	return err
}

func ctlErr(t *testing.T, in input) error {
	_, err := loadCtl(t, in)
	return err
}

func wantsName(wants []string) string { return wants[0] + wants[1] }

func TestHTTPSURL(t *testing.T) {
	check := httpsURL("https://10.0.0.1:2379")
	for _, ok := range []string{"https://10.0.0.1:2379", "https://[::1]:2380", "https://cp-1.lan:2379/"} {
		if err := check(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	tests := []struct{ v, reason string }{
		{"http://10.0.0.1:2379", "the scheme is http, and etcd runs with mutual TLS only"},
		{"ftp://10.0.0.1:2379", "not https"},
		{"https://10.0.0.1", "no port"},
		{"10.0.0.1:2379", "does not parse"},
	}
	for _, tt := range tests {
		err := check(tt.v)
		wantErr(t, err, `"`+tt.v+`" is not accepted`, tt.reason, "use an https URL", "https://10.0.0.1:2379")
	}
}

// TestPlainHTTPRefused: every etcd URL key refuses http, naming the key,
// the value and that an https URL is accepted.
func TestPlainHTTPRefused(t *testing.T) {
	const why = "the scheme is http, and etcd runs with mutual TLS only; use an https URL"
	tests := []struct {
		key  string
		load func(*testing.T, input) error
		env  map[string]string
	}{
		{"etcd.peerURL", agentErr, map[string]string{"NICO_ETCD_PEERURL": "http://10.0.0.1:2380"}},
		{"etcd.clientURL", agentErr, map[string]string{"NICO_ETCD_CLIENTURL": "http://10.0.0.1:2379"}},
		{"etcd.endpoints", bootstrapAgentErr, map[string]string{"NICO_ETCD_ENDPOINTS": "https://10.0.0.2:2379,http://10.0.0.1:2379"}},
		{"etcd.endpoints", namedCoordinatorErr, map[string]string{"NICO_ETCD_ENDPOINTS": "http://10.0.0.1:2379"}},
		{"endpoints", ctlErr, map[string]string{"NICO_ENDPOINTS": "http://10.0.0.1:2379"}},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			err := tt.load(t, input{env: tt.env})
			wantErr(t, err, "config: "+tt.key+": ", `"http://10.0.0.1:23`, why)
			if keys := keyErrors(err); len(keys) != 1 || keys[0] != tt.key {
				t.Errorf("errors on keys %q, want exactly %s", keys, tt.key)
			}
		})
	}
	// The defaults are https.
	a, err := loadAgent(t, input{args: valid})
	if err != nil || a.Etcd.PeerURL != "https://127.0.0.1:2380" || a.Etcd.ClientURL != "https://127.0.0.1:2379" {
		t.Errorf("agent defaults %q %q, %v", a.Etcd.PeerURL, a.Etcd.ClientURL, err)
	}
	c, err := loadCtl(t, input{})
	if err != nil || c.Endpoints[0] != "https://127.0.0.1:2379" {
		t.Errorf("nicoctl default endpoints %q, %v", c.Endpoints, err)
	}
}
