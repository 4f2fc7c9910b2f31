package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/enroll"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/gossipkey"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

// TestGossipSecretRotation: a bootstrap control-plane agent and two
// workers, each with its mesh member, publish their node certificates;
// nicoctl gossip rotate-key --new-secret seals a new secret to each; every
// agent opens its own (the workers through their node identity, which
// reads only their own secrets dir), keeps it in gossip.secret (0600) and
// installs it without a restart; the three stay one mesh; once they drop
// the old secret, a member that holds only it (the token) is refused and
// not even heard, at any generation; and no log line shows the new secret.
func TestGossipSecretRotation(t *testing.T) {
	t.Parallel()
	nicoctlBin(t) // built before the fleet starts
	logs := &logging.Buffer{}
	f := newFleet(t)
	log, err := logging.New(logs, "debug", "text")
	if err != nil {
		t.Fatal(err)
	}
	f.Log = log
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	cp := f.AgentConfig("cp-1", true)
	if cp.PKI.Dir == "" {
		t.Skip("plaintext etcd (NICO_ETCDTEST_TLS=0): no node certificates to seal to")
	}
	m1 := f.startMesh("cp-1", 181)
	seed := m1.Addr()
	cp.Gossip = m1
	f.Start(cp)
	f.WaitVoters(30*time.Second, "cp-1")

	meshes := map[string]*gossip.Mesh{"cp-1": m1}
	dirs := map[string]pki.Dir{"cp-1": cp.PKI.Dir}
	for i, name := range []string{"w-1", "w-2"} {
		m := f.startMesh(name, 182+i, seed)
		c := f.AgentConfig(name, false)
		c.Roles = []api.Role{api.RoleWorker}
		c.Gossip = m
		n := f.Start(c)
		testwait.For(t, 30*time.Second, name+" ready", func() (bool, string) { return n.Agent.Healthy(), "not healthy" })
		meshes[name], dirs[name] = m, c.PKI.Dir
	}
	oneMesh := func() (bool, string) {
		for name, m := range meshes {
			for peer := range meshes {
				if s, _ := m.Node(peer); s.State != gossip.Alive {
					return false, fmt.Sprintf("%s sees %s %q", name, peer, s.State)
				}
			}
		}
		return true, ""
	}
	testwait.For(t, 30*time.Second, "one mesh of three", oneMesh)
	for name := range meshes {
		waitObj(f, 30*time.Second, store.NodeKey(name), name+" publishing its certificate", func(n *api.Node) bool { return n.Status.Certificate != "" })
	}

	root := etcdtest.IssueFiles(t, t.TempDir(), pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient})
	args := []string{"--endpoints", strings.Join(f.Endpoints(), ","), "--tls.caFile", root.CA, "--tls.certFile", root.Cert, "--tls.keyFile", root.Key,
		"gossip", "rotate-key", "--new-secret"}
	if code, out, errb := runNicoctl(t, args...); code != 0 || !strings.Contains(out, "sealed to 3 node(s)") {
		t.Fatalf("nicoctl gossip rotate-key --new-secret: exit %d\n%s%s", code, out, errb)
	}
	k, err := gossipkey.Current(t.Context(), f.Store())
	if err != nil || k.Spec.SecretGeneration != 1 || k.Spec.Generation != 1 {
		t.Fatalf("stored key %+v, %v; want generation 1 from a new secret", k.Spec, err)
	}

	testwait.For(t, 60*time.Second, "every agent on the new secret", func() (bool, string) {
		for name, m := range meshes {
			if m.SecretGeneration() != 1 || m.KeyGeneration() != 1 {
				return false, fmt.Sprintf("%s: secret generation %d, key generation %d", name, m.SecretGeneration(), m.KeyGeneration())
			}
		}
		return true, ""
	})
	var secret []byte
	for name, d := range dirs {
		path := enroll.GossipSecretFile(d)
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %s: %v, %v; want mode 0600", name, path, fi, err)
		}
		s, _ := os.ReadFile(path)
		if gossip.SecretCheck(s, 1) != k.Spec.SecretCheck || (secret != nil && !bytes.Equal(s, secret)) {
			t.Fatalf("%s keeps a secret that is not the stored one", name)
		}
		secret = s
	}
	if bytes.Equal(secret, []byte("integration-token")) {
		t.Fatal("the secret was not replaced")
	}
	testwait.For(t, 30*time.Second, "one mesh of three on the new secret", oneMesh)
	// Once the others had time to switch, each drops the old secret.
	testwait.For(t, 60*time.Second, "every agent dropped the old secret", func() (bool, string) {
		for name, m := range meshes {
			if m.HoldsPreviousSecret() {
				return false, name + " still holds it"
			}
		}
		return true, ""
	})

	// Only the old secret: refused, whatever generation it speaks, and
	// never heard.
	for _, gen := range []uint64{0, 1, 2} {
		stale, err := gossip.New(gossip.Config{Name: "stale", BindAddr: meshIP(t, 184), Profile: gossip.ProfileFast, Token: []byte("integration-token"),
			KeyGeneration: gen, Logger: f.Log.With("mesh", "stale")})
		if err != nil {
			t.Fatal(err)
		}
		if err := stale.Start(); err != nil {
			t.Fatal(err)
		}
		_, err = stale.Join([]string{seed})
		_ = stale.Shutdown()
		if !errors.Is(err, gossip.ErrJoin) {
			t.Fatalf("a member with the old secret at generation %d joined: %v", gen, err)
		}
	}
	for name, m := range meshes {
		if _, heard := m.Node("stale"); heard {
			t.Fatalf("%s heard the member holding the old secret", name)
		}
	}
	testwait.For(t, 30*time.Second, "one mesh of three after the refusals", oneMesh)

	// No log line shows the secret, raw, in hex or in base64.
	all := logs.String()
	for _, enc := range []string{string(secret), hex.EncodeToString(secret), base64.StdEncoding.EncodeToString(secret), base64.RawStdEncoding.EncodeToString(secret)} {
		if strings.Contains(all, enc) {
			t.Fatal("the new gossip secret appears in the logs")
		}
	}
	if !strings.Contains(all, "gossip secret replaced") {
		t.Error("the secret's replacement is not logged")
	}
}
