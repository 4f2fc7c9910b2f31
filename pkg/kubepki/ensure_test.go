package kubepki_test

import (
	"bytes"
	"errors"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/pki"
	"golang.org/x/crypto/ssh"
	"gopkg.in/yaml.v3"
)

// TestEnsure: the first pass makes every secret under its Cluster API
// name, the second changes nothing, and nothing that exists is made
// again; the certificates say what they must and chain to the right CA.
func TestEnsure(t *testing.T) {
	e := newEnv(t)
	ctx := ctxOf(t)
	nico := etcdtest.PKI(t)
	c := kubepki.Cluster{Name: "demo", Endpoint: "https://k8s.example:6443", APIServerNames: []string{"10.0.0.11", "cp-1.example"}, Machines: []string{"cp-1", "w-1"}, NicoCA: nico}
	start := time.Now()
	res, err := kubepki.Ensure(ctx, e.sec, c, t0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first pass: %d secrets made, %d leaves issued in %s", len(res.Created), len(res.Renewed), time.Since(start).Round(time.Millisecond))
	wantCreated := []string{"demo-ca", "demo-proxy", "demo-sa", "demo-join-token", "demo-bootstrap-token", "demo-ssh.cp-1", "demo-ssh.w-1"}
	if !slices.Equal(res.Created, wantCreated) {
		t.Fatalf("created %v, want %v", res.Created, wantCreated)
	}
	var renewed []string
	for _, d := range res.Renewed {
		renewed = append(renewed, d.Leaf.Secret)
		if d.Reason != pki.ReasonMissing {
			t.Errorf("%s issued because %s, want missing", d.Leaf.Secret, d.Reason)
		}
	}
	if want := []string{"demo-apiserver", "demo-apiserver-kubelet-client", "demo-proxy-client", "demo-apiserver-etcd-client", "demo-kubeconfig", "demo-controller-manager", "demo-scheduler"}; !slices.Equal(renewed, want) {
		t.Fatalf("issued %v, want %v", renewed, want)
	}
	caBefore := e.secret(t, "demo-ca").Spec.Data[kubepki.KeyKey]
	start = time.Now()
	again, err := kubepki.Ensure(ctx, e.sec, c, t0.Add(time.Hour))
	t.Logf("second pass (nothing due) in %s", time.Since(start).Round(time.Millisecond))
	if err != nil || len(again.Created)+len(again.Renewed)+len(again.Deleted) != 0 {
		t.Fatalf("second pass: %+v, %v", again, err)
	}
	if !bytes.Equal(caBefore, e.secret(t, "demo-ca").Spec.Data[kubepki.KeyKey]) {
		t.Fatal("the CA was made again")
	}

	ca, err := pki.ParseCA(e.secret(t, "demo-ca").Spec.Data[kubepki.KeyCert], caBefore)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(name string) []byte { return e.secret(t, name).Spec.Data[kubepki.KeyCert] }
	etcdClient, _ := pki.ParseCert(leaf("demo-apiserver-etcd-client"))
	if etcdClient.Subject.CommonName != "kubernetes:demo" || etcdClient.CheckSignatureFrom(nico.Cert) != nil {
		t.Fatalf("etcd client: CN %q, signed by nico's CA: %v", etcdClient.Subject.CommonName, etcdClient.CheckSignatureFrom(nico.Cert))
	}
	if got := etcdClient.NotAfter.Sub(etcdClient.NotBefore); got > kubepki.LeafValidity+time.Minute {
		t.Fatalf("etcd client lives %s, want %s", got, kubepki.LeafValidity)
	}
	serving, _ := pki.ParseCert(leaf("demo-apiserver"))
	if serving.CheckSignatureFrom(ca.Cert) != nil || serving.VerifyHostname("k8s.example") != nil || serving.VerifyHostname("10.0.0.11") != nil || serving.VerifyHostname("kubernetes.default.svc") != nil || serving.VerifyHostname("10.96.0.1") != nil {
		t.Fatalf("serving certificate names %v %v", serving.DNSNames, serving.IPAddresses)
	}
	sa := e.secret(t, "demo-sa").Spec.Data
	if !bytes.HasPrefix(sa[kubepki.KeyCert], []byte("-----BEGIN PUBLIC KEY-----")) {
		t.Fatalf("sa tls.crt is not a public key: %.40q", sa[kubepki.KeyCert])
	}
	if tok := string(e.secret(t, "demo-join-token").Spec.Data[kubepki.KeyValue]); !regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`).MatchString(tok) {
		t.Fatalf("token %q is not of kubeadm's shape", tok)
	}
	key, err := ssh.ParsePrivateKey(e.secret(t, "demo-ssh.w-1").Spec.Data[kubepki.KeySSHPrivate])
	if err != nil || key.PublicKey().Type() != ssh.KeyAlgoED25519 {
		t.Fatalf("ssh key: %v", err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(e.secret(t, "demo-ssh.w-1").Spec.Data[kubepki.KeySSHPublic])
	if err != nil || !bytes.Equal(pub.Marshal(), key.PublicKey().Marshal()) {
		t.Fatalf("ssh public key does not match: %v", err)
	}

	// The admin kubeconfig: server, CA and a system:masters user.
	var kc struct {
		Clusters []struct {
			Cluster struct {
				Server string `yaml:"server"`
			} `yaml:"cluster"`
		} `yaml:"clusters"`
	}
	if err := yaml.Unmarshal(e.secret(t, "demo-kubeconfig").Spec.Data[kubepki.KeyValue], &kc); err != nil || kc.Clusters[0].Cluster.Server != c.Endpoint {
		t.Fatalf("kubeconfig: %+v, %v", kc, err)
	}

	// A machine leaves: its SSH key goes. The endpoint moves: the
	// kubeconfigs follow, the CA stays.
	c.Machines = []string{"cp-1"}
	c.Endpoint = "https://10.0.0.100:6443"
	res, err = kubepki.Ensure(ctx, e.sec, c, t0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Deleted, []string{"demo-ssh.w-1"}) {
		t.Fatalf("deleted %v", res.Deleted)
	}
	reasons := map[string]pki.Reason{}
	for _, d := range res.Renewed {
		reasons[d.Leaf.Secret] = d.Reason
	}
	want := map[string]pki.Reason{"demo-apiserver": pki.ReasonChanged, "demo-kubeconfig": pki.ReasonChanged, "demo-controller-manager": pki.ReasonChanged, "demo-scheduler": pki.ReasonChanged}
	if len(reasons) != len(want) {
		t.Fatalf("renewed %v, want %v", reasons, want)
	}
	for k, v := range want {
		if reasons[k] != v {
			t.Fatalf("renewed %v, want %v", reasons, want)
		}
	}
}

// TestEnsureUserCA: a CA the user brings becomes <c>-ca and signs the
// leaves; another one later is refused, and so is a name another cluster
// owns.
func TestEnsureUserCA(t *testing.T) {
	e := newEnv(t)
	ctx := ctxOf(t)
	user, err := pki.NewCA("acme root", 0, t0)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := mustKeyPEM(t, user)
	c := kubepki.Cluster{Name: "acme", Provider: kubepki.ProviderDistribution, Endpoint: "https://10.0.0.1:6443", CA: &kubepki.UserCA{CertPEM: user.CertPEM, KeyPEM: keyPEM}}
	res, err := kubepki.Ensure(ctx, e.sec, c, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Created, "acme-etcd") {
		t.Fatalf("provider distribution: no etcd CA made: %v", res.Created)
	}
	if got := e.secret(t, "acme-ca").Spec.Data[kubepki.KeyCert]; !bytes.Equal(got, user.CertPEM) {
		t.Fatal("the user's CA is not acme-ca")
	}
	serving, _ := pki.ParseCert(e.secret(t, "acme-apiserver").Spec.Data[kubepki.KeyCert])
	if err := serving.CheckSignatureFrom(user.Cert); err != nil {
		t.Fatalf("serving certificate not signed by the user's CA: %v", err)
	}
	etcdCA, _ := pki.ParseCert(e.secret(t, "acme-etcd").Spec.Data[kubepki.KeyCert])
	etcdClient, _ := pki.ParseCert(e.secret(t, "acme-apiserver-etcd-client").Spec.Data[kubepki.KeyCert])
	if etcdClient.CheckSignatureFrom(etcdCA) != nil || etcdClient.Subject.CommonName != "kube-apiserver-etcd-client" {
		t.Fatalf("distribution's etcd client: CN %q", etcdClient.Subject.CommonName)
	}
	other, _ := pki.NewCA("other", 0, t0)
	c.CA = &kubepki.UserCA{CertPEM: other.CertPEM, KeyPEM: mustKeyPEM(t, other)}
	if _, err := kubepki.Ensure(ctx, e.sec, c, t0); !errors.Is(err, kubepki.ErrBadCluster) {
		t.Fatalf("another CA: %v, want ErrBadCluster", err)
	}
	// A secret of acme's names that another cluster wrote is not taken.
	s := api.NewSecret("b-ca")
	s.Spec = api.SecretSpec{Cluster: "someone-else", Data: map[string][]byte{"tls.crt": user.CertPEM}}
	if err := e.sec.Put(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := kubepki.Ensure(ctx, e.sec, kubepki.Cluster{Name: "b", Provider: kubepki.ProviderExternal}, t0); !errors.Is(err, kubepki.ErrNotOwned) {
		t.Fatalf("another cluster's secret: %v, want ErrNotOwned", err)
	}
	// Provider external waits for the user's etcd CA.
	res, err = kubepki.Ensure(ctx, e.sec, kubepki.Cluster{Name: "ext", Provider: kubepki.ProviderExternal}, t0)
	if err != nil || !slices.Equal(res.Waiting, []string{"ext-etcd"}) {
		t.Fatalf("external: %+v, %v", res, err)
	}
	if _, err := kubepki.Ensure(ctx, e.sec, kubepki.Cluster{Name: "x.y", Provider: kubepki.ProviderExternal}, t0); !errors.Is(err, kubepki.ErrBadCluster) {
		t.Fatalf("a dotted name: %v", err)
	}
	if _, err := kubepki.Ensure(ctx, e.sec, kubepki.Cluster{Name: "n"}, t0); !errors.Is(err, kubepki.ErrBadCluster) {
		t.Fatalf("provider nico without nico's CA: %v", err)
	}
}

// TestRenew: five days on (of seven), every leaf is re-issued as
// expiring, its key pair new, and the CAs, keys and token stay.
func TestRenew(t *testing.T) {
	e := newEnv(t)
	ctx := ctxOf(t)
	c := kubepki.Cluster{Name: "demo", Endpoint: "https://10.0.0.1:6443", NicoCA: etcdtest.PKI(t)}
	if _, err := kubepki.Ensure(ctx, e.sec, c, t0); err != nil {
		t.Fatal(err)
	}
	before := e.secret(t, "demo-apiserver-etcd-client").Spec.Data[kubepki.KeyKey]
	tok := e.secret(t, "demo-join-token").Spec.Data[kubepki.KeyValue]
	if due, err := kubepki.Renew(ctx, e.sec, c, t0.Add(4*24*time.Hour)); err != nil || len(due) != 0 {
		t.Fatalf("day 4 of 7: %v, %v", due, err)
	}
	due, err := kubepki.Renew(ctx, e.sec, c, t0.Add(5*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != len(kubepki.Leaves(c)) {
		t.Fatalf("day 5: renewed %d of %d leaves", len(due), len(kubepki.Leaves(c)))
	}
	for _, d := range due {
		if d.Reason != pki.ReasonExpiring {
			t.Errorf("%s: %s, want expiring", d.Leaf.Secret, d.Reason)
		}
	}
	if bytes.Equal(before, e.secret(t, "demo-apiserver-etcd-client").Spec.Data[kubepki.KeyKey]) {
		t.Fatal("the renewed certificate kept its key")
	}
	if !bytes.Equal(tok, e.secret(t, "demo-join-token").Spec.Data[kubepki.KeyValue]) {
		t.Fatal("renewal changed the token")
	}
	if due, err := kubepki.Renew(ctx, e.sec, c, t0.Add(5*24*time.Hour)); err != nil || len(due) != 0 {
		t.Fatalf("right after renewal: %v, %v", due, err)
	}
}

// TestEnsureConcurrently: two passes at once (a deposed leader's last and
// the new leader's first) both succeed and leave one CA, which every leaf
// chains to once a pass has looked again.
func TestEnsureConcurrently(t *testing.T) {
	e := newEnv(t)
	ctx := ctxOf(t)
	c := kubepki.Cluster{Name: "demo", Endpoint: "https://10.0.0.1:6443", NicoCA: etcdtest.PKI(t), Machines: []string{"cp-1"}}
	errs := make(chan error, 2)
	for range 2 {
		go func() { _, err := kubepki.Ensure(ctx, e.sec, c, t0); errs <- err }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kubepki.Ensure(ctx, e.sec, c, t0); err != nil {
		t.Fatal(err)
	}
	ca, err := pki.ParseCert(e.secret(t, "demo-ca").Spec.Data[kubepki.KeyCert])
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range kubepki.Leaves(c) {
		if l.Issuer != "demo-ca" || l.Kubeconfig {
			continue
		}
		crt, _ := pki.ParseCert(e.secret(t, l.Secret).Spec.Data[kubepki.KeyCert])
		if err := crt.CheckSignatureFrom(ca); err != nil {
			t.Errorf("%s does not chain to the one CA: %v", l.Secret, err)
		}
	}
	if res, err := kubepki.Ensure(ctx, e.sec, c, t0); err != nil || len(res.Created)+len(res.Renewed) != 0 {
		t.Fatalf("after the race: %+v, %v", res, err)
	}
}
