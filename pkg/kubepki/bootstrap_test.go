package kubepki_test

import (
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubepki"
	"gopkg.in/yaml.v3"
)

// TestBootstrapToken: Ensure makes the bootstrap token with its expiry
// and kubeconfig (the endpoint, the cluster CA, the token and nothing
// else), keeps it while more than a third of its TTL is left, replaces it
// after, and re-makes the kubeconfig when the endpoint moves.
func TestBootstrapToken(t *testing.T) {
	e := newEnv(t)
	ctx := ctxOf(t)
	c := kubepki.Cluster{Name: "demo", Endpoint: "https://10.0.0.1:6443", Machines: []string{"cp-1", "w-1"}, NicoCA: etcdtest.PKI(t)}
	if _, err := kubepki.Ensure(ctx, e.sec, c, t0); err != nil {
		t.Fatal(err)
	}
	sec := e.secret(t, kubepki.BootstrapTokenSecret("demo"))
	tok, err := kubepki.ParseBootstrapToken(sec.Spec.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !tok.Expires.Equal(t0.Add(kubepki.BootstrapTokenTTL)) {
		t.Fatalf("expires %s, want %s", tok.Expires, t0.Add(kubepki.BootstrapTokenTTL))
	}
	var kc struct {
		Clusters []struct {
			Cluster struct {
				Server string `yaml:"server"`
				CA     string `yaml:"certificate-authority-data"`
			} `yaml:"cluster"`
		} `yaml:"clusters"`
		Users []struct {
			User map[string]string `yaml:"user"`
		} `yaml:"users"`
	}
	if err := yaml.Unmarshal(sec.Spec.Data[kubepki.KeyKubeconfig], &kc); err != nil {
		t.Fatal(err)
	}
	if len(kc.Clusters) != 1 || kc.Clusters[0].Cluster.Server != c.Endpoint || kc.Clusters[0].Cluster.CA == "" || len(kc.Users) != 1 ||
		len(kc.Users[0].User) != 1 || kc.Users[0].User["token"] != tok.String() {
		t.Fatalf("bootstrap kubeconfig:\n%s", sec.Spec.Data[kubepki.KeyKubeconfig])
	}

	// Two thirds of the TTL later, minus a second: kept.
	keep := t0.Add(kubepki.BootstrapTokenTTL * 2 / 3).Add(-time.Second)
	res, err := kubepki.Ensure(ctx, e.sec, c, keep)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rotated) != 0 || string(e.secret(t, kubepki.BootstrapTokenSecret("demo")).Spec.Data[kubepki.KeyValue]) != tok.String() {
		t.Fatalf("token rewritten before it was due: %+v", res)
	}
	// Past two thirds: a new token, a new expiry, a new kubeconfig.
	due := keep.Add(2 * time.Second)
	if res, err = kubepki.Ensure(ctx, e.sec, c, due); err != nil {
		t.Fatal(err)
	}
	next, err := kubepki.ParseBootstrapToken(e.secret(t, kubepki.BootstrapTokenSecret("demo")).Spec.Data)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rotated) != 1 || next.ID == tok.ID || !next.Expires.Equal(due.Add(kubepki.BootstrapTokenTTL).Truncate(time.Second)) {
		t.Fatalf("rotation: %+v, token %s expiring %s (was %s)", res, next.ID, next.Expires, tok.ID)
	}
	// The endpoint moves: the kubeconfig follows, the token stays.
	c.Endpoint = "https://10.0.0.2:6443"
	if _, err := kubepki.Ensure(ctx, e.sec, c, due); err != nil {
		t.Fatal(err)
	}
	moved := e.secret(t, kubepki.BootstrapTokenSecret("demo")).Spec.Data
	if !strings.Contains(string(moved[kubepki.KeyKubeconfig]), c.Endpoint) || string(moved[kubepki.KeyValue]) != next.String() {
		t.Fatalf("after the endpoint moved:\n%s", moved[kubepki.KeyKubeconfig])
	}
}
