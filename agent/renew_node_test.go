package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/agent/joinendpoint"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/enroll"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
)

func TestPlanNodeCert(t *testing.T) {
	ca, err := pki.NewCA("plan", 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	issued := time.Now()
	// 90 days + the 1 minute backdate; a third is 30 days and 20 seconds.
	cert, _, err := ca.Issue(pki.Request{CommonName: pki.NodeIdentity("w-1"), Usage: pki.UsageClient, Validity: 90 * 24 * time.Hour}, issued)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		after time.Duration
		want  nodeCertStep
	}{
		{0, nodeCertKeep},
		{59 * 24 * time.Hour, nodeCertKeep},
		{61 * 24 * time.Hour, nodeCertRenew},
		{90*24*time.Hour - time.Second, nodeCertRenew},
		{90 * 24 * time.Hour, nodeCertRejoin},
		{400 * 24 * time.Hour, nodeCertRejoin},
	} {
		got, _, err := planNodeCert(cert, issued.Add(c.after))
		if err != nil || got != c.want {
			t.Errorf("+%s: %v %v, want %v", c.after, got, err, c.want)
		}
	}
	if _, _, err := planNodeCert([]byte("not PEM"), issued); err == nil {
		t.Error("garbage planned")
	}
}

// TestWorkerRenewsNodeCert: a worker agent (no ca.key) whose node
// certificate is short-lived renews it through a real join endpoint
// (POST /v1/renew, authenticated by that certificate) against a real TLS
// etcd cluster, and once the old certificate has expired (etcd refuses it),
// its etcd client, made to dial again, and any new client of its TLS
// identity still get through: they present the new serial.
func TestWorkerRenewsNodeCert(t *testing.T) {
	cl := etcdtest.StartWith(t, etcdtest.Options{TLS: true})
	cpDir := etcdtest.ControlPlaneDir(t)
	listen := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	logs := &logging.Buffer{}
	log := bufferLog(t, logs)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	je := joinendpoint.New(joinendpoint.Config{Name: "cp-1", Dir: cpDir, Listen: listen, Endpoints: cl.Endpoints(), Poll: 50 * time.Millisecond}, log)
	served := serveJoinEndpoint(t, ctx, je)

	// The worker's pki.dir: ca.crt and a node certificate valid for 10s
	// (plus the 1 minute backdate: due at once).
	ca := etcdtest.PKI(t)
	d := pki.Dir(filepath.Join(t.TempDir(), "pki"))
	oldCert, oldKey, err := ca.Issue(pki.Request{CommonName: pki.NodeIdentity("w-1"), Usage: pki.UsageClient, Validity: 10 * time.Second}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string][]byte{d.CACert(): ca.CertPEM, d.Cert(certNode): oldCert, d.Key(certNode): oldKey} {
		if err := pki.WriteFile(path, data); err != nil {
			t.Fatal(err)
		}
	}
	old, err := pki.ParseCert(oldCert)
	if err != nil {
		t.Fatal(err)
	}
	// A copy of the old pair, to show etcd refuses it once expired.
	oldCopy := pki.Dir(t.TempDir())
	_ = pki.WriteFile(oldCopy.Cert(certNode), oldCert)
	_ = pki.WriteFile(oldCopy.Key(certNode), oldKey)

	etcdURL := cl.Endpoints()[0]
	a := New(Config{
		Name: "w-1", Roles: []api.Role{api.RoleWorker}, Endpoints: []string{etcdURL},
		DialTimeout: 5 * time.Second, HeartbeatTTL: 3 * time.Second, PKI: PKIConfig{Dir: d},
	}, nil, quietNotifier{}, log)
	a.RenewInterval = 100 * time.Millisecond
	a.RenewNodeCert = joinendpoint.Renew([]string{listen}, log)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	// The certificate is renewed: same CN, new serial, a year long.
	deadline := time.Now().Add(60 * time.Second)
	var renewed bool
	for !renewed || !a.Healthy() {
		select {
		case err := <-done:
			t.Fatalf("agent stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not renewed and healthy within 60s (renewed %v, healthy %v)", renewed, a.Healthy())
		}
		renewed = readCert(t, d.Cert(certNode)).SerialNumber.Cmp(old.SerialNumber) != 0
		time.Sleep(50 * time.Millisecond)
	}
	cur := readCert(t, d.Cert(certNode))
	if cur.Subject.CommonName != "node:w-1" || cur.NotAfter.Sub(old.NotAfter) < 300*24*time.Hour {
		t.Fatalf("renewed certificate: CN %q, notAfter %s", cur.Subject.CommonName, cur.NotAfter)
	}
	wantPrivate(t, d.Cert(certNode))
	wantPrivate(t, d.Key(certNode))
	// The node status publishes the renewed certificate (what nicoctl
	// gossip rotate-key --new-secret seals the new gossip secret to).
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		n := &api.Node{}
		err := st.Get(ctx, store.NodeKey("w-1"), n)
		if err == nil && n.Status.Certificate != "" {
			if pub, perr := pki.ParseCert([]byte(n.Status.Certificate)); perr == nil && pub.SerialNumber.Cmp(cur.SerialNumber) == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node status does not publish the renewed certificate within 30s (%v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Wait until the old certificate has expired.
	for !time.Now().After(old.NotAfter.Add(time.Second)) {
		time.Sleep(100 * time.Millisecond)
	}
	// etcd refuses it now...
	oldTLS, err := pki.ClientTLS(d.CACert(), oldCopy.Cert(certNode), oldCopy.Key(certNode))
	if err != nil {
		t.Fatal(err)
	}
	if err := putWith(ctx, oldTLS, etcdURL, "old"); err == nil {
		t.Fatal("etcd accepted the expired certificate: the test proves nothing")
	}
	// ...and a new client of the agent's TLS identity gets through.
	if err := putWith(ctx, a.tls, etcdURL, "new"); err != nil {
		t.Fatalf("a new client of the agent's identity after the old certificate expired: %v", err)
	}
	// The agent's own client, dialing again (another URL of the same
	// member), gets through too.
	a.client().SetEndpoints(strings.Replace(etcdURL, "127.0.0.1", "localhost", 1))
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	defer pcancel()
	if _, err := a.client().Put(pctx, "/renew-test/agent", cur.SerialNumber.Text(16)); err != nil {
		t.Fatalf("the agent's client after the old certificate expired: %v", err)
	}
	if !a.Healthy() {
		t.Fatal("the agent is not healthy after the renewal")
	}
	if !strings.Contains(logs.String(), "node certificate renewed through the join endpoint") || !strings.Contains(logs.String(), "node=w-1 oldSerial="+old.SerialNumber.Text(16)) {
		t.Errorf("the renewal is not logged by the agent and the endpoint")
	}
	// Once the node is recorded removed, the endpoint renews it no more.
	n := &api.Node{}
	if err := st.Get(ctx, store.NodeKey("w-1"), n); err != nil {
		t.Fatal(err)
	}
	n.Status.Phase = api.NodeRemoved
	if err := st.Put(ctx, store.NodeKey("w-1"), n); err != nil {
		t.Fatal(err)
	}
	if _, err := enroll.Renew(ctx, enroll.RenewConfig{Endpoints: []string{listen}, Log: log}, d); !errors.Is(err, enroll.ErrNodeRemoved) {
		t.Fatalf("renewal of a removed node: %v, want ErrNodeRemoved", err)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("endpoint: %v", err)
	}
}

// putWith writes a key through a new client of tlsCfg.
func putWith(ctx context.Context, tlsCfg *tls.Config, url, value string) error {
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: []string{url}, DialTimeout: 3 * time.Second, TLS: tlsCfg})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = cli.Put(ctx, "/renew-test/"+value, value)
	return err
}

// TestExpiredNodeCertRejoins: an expired node certificate is not sent for
// renewal; the agent says the node must join again and, with a token,
// does (ObtainCerts). Without one, the error says what to do.
func TestExpiredNodeCertRejoins(t *testing.T) {
	ca, err := pki.NewCA("fleet", 0, time.Now().Add(-48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	d := pki.Dir(t.TempDir())
	cert, key, err := ca.Issue(pki.Request{CommonName: pki.NodeIdentity("w-1"), Usage: pki.UsageClient, Validity: time.Hour}, time.Now().Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	_ = pki.WriteFile(d.Cert(certNode), cert)
	_ = pki.WriteFile(d.Key(certNode), key)
	logs := &logging.Buffer{}
	a := New(Config{Name: "w-1", Roles: []api.Role{api.RoleWorker}, PKI: PKIConfig{Dir: d}}, nil, quietNotifier{}, bufferLog(t, logs))
	renewCalls := 0
	a.RenewNodeCert = func(context.Context, pki.Dir) (*x509.Certificate, error) {
		renewCalls++
		return nil, enroll.ErrCertExpired
	}
	if err := a.nodeCertRenewer().once(context.Background()); err == nil || !strings.Contains(err.Error(), "join token in tokenFile") {
		t.Fatalf("no token: %v", err)
	}
	if renewCalls != 0 || !strings.Contains(logs.String(), "the node must join again with a join token") {
		t.Fatalf("renew calls %d; logs:\n%s", renewCalls, logs)
	}
	obtained := 0
	a.ObtainCerts = func(_ context.Context, d pki.Dir) error {
		obtained++
		c, k, err := ca.Issue(pki.Request{CommonName: pki.NodeIdentity("w-1"), Usage: pki.UsageClient}, time.Now())
		if err != nil {
			return err
		}
		return pki.WritePair(d.Cert(certNode), c, d.Key(certNode), k)
	}
	if err := a.nodeCertRenewer().once(context.Background()); err != nil || obtained != 1 {
		t.Fatalf("with a token: %v, obtained %d", err, obtained)
	}
	// Renewed by the token's join: nothing more to do.
	if err := a.nodeCertRenewer().once(context.Background()); err != nil || obtained != 1 || renewCalls != 0 {
		t.Fatalf("after joining again: %v, obtained %d, renew calls %d", err, obtained, renewCalls)
	}
	// An endpoint that says the certificate expired (clocks apart) leads
	// to the same.
	due, dueKey, _ := ca.Issue(pki.Request{CommonName: pki.NodeIdentity("w-1"), Usage: pki.UsageClient, Validity: 10 * time.Second}, time.Now())
	_ = pki.WritePair(d.Cert(certNode), due, d.Key(certNode), dueKey)
	if err := a.nodeCertRenewer().once(context.Background()); err != nil || renewCalls != 1 || obtained != 2 {
		t.Fatalf("endpoint says expired: %v, renew calls %d, obtained %d", err, renewCalls, obtained)
	}
	_ = os.Remove(d.Cert(certNode))
	if err := a.nodeCertRenewer().once(context.Background()); err == nil {
		t.Fatal("a missing node certificate is not an error")
	}
}

// bufferLog is a debug logger into logs, shown when the test fails.
func bufferLog(t *testing.T, logs *logging.Buffer) *slog.Logger {
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
