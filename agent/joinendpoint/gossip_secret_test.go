package joinendpoint

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/gossipkey"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/token"
)

// TestJoinEndpointGivesTheCurrentGossipSecret: after nicoctl gossip
// rotate-key --new-secret, a machine that joins (no secret was sealed to
// it) gets the new secret, which the endpoint opens from the one sealed to
// its own machine, not the token the first secret was.
func TestJoinEndpointGivesTheCurrentGossipSecret(t *testing.T) {
	cl := etcdtest.StartWith(t, etcdtest.Options{TLS: true})
	cpDir := etcdtest.ControlPlaneDir(t)
	certPEM, keyPEM, err := etcdtest.PKI(t).Issue(pki.Request{CommonName: pki.NodeIdentity("cp-1"), Usage: pki.UsageClient}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.WritePair(cpDir.Cert(pki.NodeLeaf), certPEM, cpDir.Key(pki.NodeLeaf), keyPEM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	n := api.NewNode("cp-1")
	n.Status.Certificate = string(certPEM)
	if err := st.Put(ctx, store.NodeKey("cp-1"), n); err != nil {
		t.Fatal(err)
	}
	to, _ := gossipkey.Recipients([]*api.Node{n}, etcdtest.PKI(t).Pool(), time.Now())
	if _, err := gossipkey.RotateSecret(ctx, st, to, "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	k, _ := gossipkey.Current(ctx, st)

	boot, _ := token.Generate()
	bootFile := writeToken(t, boot.Reveal())
	listen := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	log := logging.Test(t)
	je := New(Config{
		Name: "cp-1", Dir: cpDir, Listen: listen, Endpoints: cl.Endpoints(), TokenFile: bootFile, Bootstrap: true, Poll: 50 * time.Millisecond,
	}, log)
	served := serveJoinEndpoint(t, ctx, je)

	workerDir := pki.Dir(t.TempDir())
	if err := Obtain(ClientConfig{Name: "w-1", Roles: []api.Role{api.RoleWorker}, Endpoints: []string{listen}, TokenFile: bootFile}, log)(ctx, workerDir); err != nil {
		t.Fatal(err)
	}
	s, err := GossipSecret(workerDir, "")
	if err != nil || string(s) == boot.Reveal() || gossip.SecretCheck(s, k.Spec.SecretGeneration) != k.Spec.SecretCheck {
		t.Fatalf("the joined machine's gossip secret is not the current one (%v)", err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("endpoint: %v", err)
	}
}
