package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestJoinEndpointKeys(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("abc123.0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// join.endpoints default to the gossip seeds' hosts at port 7950.
	a, err := loadAgent(t, input{args: []string{"--name=w-1", "--tokenFile=" + tok, "--gossip.seeds=10.0.0.1,10.0.0.2:7946,[fd00::1]:7946"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"10.0.0.1:7950", "10.0.0.2:7950", "[fd00::1]:7950"}; !slices.Equal(a.JoinEndpoint.Endpoints, want) || a.JoinEndpoint.Listen != ":7950" {
		t.Fatalf("join = %+v, want endpoints %v", a.JoinEndpoint, want)
	}
	a, err = loadAgent(t, input{env: map[string]string{"NICO_JOIN_ENDPOINTS": "cp-1:8000"}, args: []string{"--name=w-1", "--join.listen=127.0.0.1:9000", "--etcd.endpoints=https://10.0.0.1:2379"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.JoinEndpoint.Endpoints, []string{"cp-1:8000"}) || a.JoinEndpoint.Listen != "127.0.0.1:9000" {
		t.Fatalf("join = %+v", a.JoinEndpoint)
	}
	_, err = loadAgent(t, input{args: []string{"--name=w-1", "--join.listen=7950", "--etcd.endpoints=https://10.0.0.1:2379"}})
	wantErr(t, err, "join.listen", `"7950" is not accepted`, ":7950")
	_, err = loadAgent(t, input{args: []string{"--name=w-1", "--join.endpoints=cp-1", "--etcd.endpoints=https://10.0.0.1:2379"}})
	wantErr(t, err, "join.endpoints", `"cp-1" is not accepted`)
}

func TestSecretsKeyFile(t *testing.T) {
	c, err := loadCtl(t, input{args: []string{"--secrets.keyFile=/etc/nico/secrets.key"}})
	if err != nil || c.Secrets.KeyFile != "/etc/nico/secrets.key" {
		t.Fatalf("%+v %v", c.Secrets, err)
	}
	// Relative, like the certificate paths: the working directory's.
	c, err = loadCtl(t, input{args: []string{"--secrets.keyFile=relative.key", "--tls.caFile=ca.crt"}})
	wd, _ := os.Getwd()
	if err != nil || c.Secrets.KeyFile != filepath.Join(wd, "relative.key") || c.TLS.CAFile != filepath.Join(wd, "ca.crt") {
		t.Fatalf("relative paths: %+v %+v %v, want both resolved against %s", c.Secrets, c.TLS, err, wd)
	}
	_, err = loadCtl(t, input{args: []string{"--secrets.keyFile="}})
	wantErr(t, err, "secrets.keyFile", `""`)
}

func TestJoinRateKeys(t *testing.T) {
	args := []string{"--name=w-1", "--etcd.endpoints=https://10.0.0.1:2379"}
	a, err := loadAgent(t, input{args: args})
	if b, every := a.JoinEndpoint.Rate(); err != nil || b != 0 || every != 0 {
		t.Fatalf("defaults: %d %s %v", b, every, err)
	}
	a, err = loadAgent(t, input{args: append(args, "--join.rateBurst=5", "--join.rateInterval=3s")})
	if b, every := a.JoinEndpoint.Rate(); err != nil || b != 5 || every != 3*time.Second {
		t.Fatalf("set: %d %s %v", b, every, err)
	}
	_, err = loadAgent(t, input{args: append(args, "--join.rateBurst=0")})
	wantErr(t, err, "join.rateBurst", `"0" is not accepted`)
	_, err = loadAgent(t, input{args: append(args, "--join.rateInterval=-1s")})
	wantErr(t, err, "join.rateInterval", "-1s is not accepted")
}
