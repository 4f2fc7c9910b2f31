package kubepki_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/pki"
)

// caKeys are the secrets whose tls.key is a CA's private key.
var caKeys = []string{"demo-ca", "demo-proxy", "demo-etcd"}

// TestLayout: kubeadm's paths, valid host files under the default roots;
// a data-plane machine gets no CA key (no private key of any CA, no
// control-plane key), a control-plane machine everything the API server,
// controller-manager and scheduler read.
func TestLayout(t *testing.T) {
	for _, prov := range []kubepki.Provider{kubepki.ProviderNico, kubepki.ProviderDistribution} {
		l := kubepki.Layout{Cluster: "demo", Provider: prov, NicoCACertPEM: []byte("NICO CA")}
		dp := l.HostFiles("w-1", kubepki.RoleDataPlane)
		cp := l.HostFiles("cp-1", kubepki.RoleControlPlane)
		for _, files := range [][]api.HostFile{dp, cp} {
			if err := apply.ValidateHostFiles(files, nil); err != nil {
				t.Fatalf("%s: %v", prov, err)
			}
		}
		for _, f := range dp {
			if f.SecretRef != nil && f.SecretRef.Key == kubepki.KeyKey {
				t.Errorf("%s: data plane gets %s %s at %s", prov, f.SecretRef.Name, f.SecretRef.Key, f.Path)
			}
		}
		paths := map[string]api.HostFile{}
		for _, f := range cp {
			paths[f.Path] = f
		}
		for _, p := range []string{"/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/ca.key", "/etc/kubernetes/pki/sa.key", "/etc/kubernetes/pki/sa.pub",
			"/etc/kubernetes/pki/front-proxy-ca.crt", "/etc/kubernetes/pki/apiserver-etcd-client.crt", "/etc/kubernetes/pki/apiserver-etcd-client.key",
			"/etc/kubernetes/pki/etcd/ca.crt", "/etc/kubernetes/controller-manager.conf", "/etc/kubernetes/scheduler.conf",
			"/etc/kubernetes/admin.conf", "/etc/kubernetes/pki/front-proxy-ca.key",
			"/var/lib/nico/cluster/join-token", "/var/lib/nico/cluster/machine-ssh-key"} {
			if _, ok := paths[p]; !ok {
				t.Errorf("%s: control plane lacks %s", prov, p)
			}
		}
		if k := paths["/etc/kubernetes/pki/ca.key"]; k.Mode != "0600" {
			t.Errorf("ca.key mode %q", k.Mode)
		}
		etcdCA := paths["/etc/kubernetes/pki/etcd/ca.crt"]
		if prov == kubepki.ProviderNico && etcdCA.Inline != "NICO CA" || prov != kubepki.ProviderNico && etcdCA.SecretRef.Name != "demo-etcd" {
			t.Errorf("%s: etcd/ca.crt is %+v", prov, etcdCA)
		}
		for _, f := range cp {
			if f.SecretRef != nil && f.SecretRef.Name == "demo-etcd" && f.SecretRef.Key == kubepki.KeyKey {
				t.Errorf("%s: control plane gets the etcd CA's key", prov)
			}
		}
		// The data plane gets the bootstrap kubeconfig and token, the CA
		// certificate and its SSH key: no other credential, not the
		// servers' join token.
		for _, f := range dp {
			if f.SecretRef == nil {
				continue
			}
			switch ref := *f.SecretRef; {
			case ref.Name == "demo-bootstrap-token" && (ref.Key == kubepki.KeyKubeconfig || ref.Key == kubepki.KeyValue),
				ref.Name == "demo-ca" && ref.Key == kubepki.KeyCert, ref.Name == "demo-ssh.w-1":
			default:
				t.Errorf("%s: data plane gets %s/%s at %s", prov, ref.Name, ref.Key, f.Path)
			}
		}
	}
}

// TestProjection: the leader projects each machine's values sealed to its
// node key; the agent opens them and the exec applier's host files land
// from them; a data-plane machine's projection holds no CA key; another
// machine's key does not open it; an unchanged projection is not written
// again, a renewed certificate is.
func TestProjection(t *testing.T) {
	e := newEnv(t)
	ctx := ctxOf(t)
	nico := etcdtest.PKI(t)
	c := kubepki.Cluster{Name: "demo", Endpoint: "https://10.0.0.1:6443", Machines: []string{"cp-1", "w-1"}, NicoCA: nico}
	if _, err := kubepki.Ensure(ctx, e.sec, c, t0); err != nil {
		t.Fatal(err)
	}
	nodeDir := func(name string) (pki.Dir, []byte) {
		d := pki.Dir(filepath.Join(t.TempDir(), "pki"))
		crt, key, err := nico.Issue(pki.Request{CommonName: pki.NodeIdentity(name), Usage: pki.UsageClient}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := pki.WritePair(d.Cert(pki.NodeLeaf), crt, d.Key(pki.NodeLeaf), key); err != nil {
			t.Fatal(err)
		}
		return d, crt
	}
	l := kubepki.Layout{Cluster: "demo", NicoCACertPEM: nico.CertPEM}
	project := func(machine string, role kubepki.Role, crtPEM []byte) (kubepki.Projection, bool) {
		t.Helper()
		p, err := kubepki.Select(ctx, e.sec, "demo", l.HostFiles(machine, role))
		if err != nil {
			t.Fatal(err)
		}
		crt, _ := pki.ParseCert(crtPEM)
		wrote, err := kubepki.Project(ctx, e.st, nil, machine, crt, p)
		if err != nil {
			t.Fatal(err)
		}
		return p, wrote
	}
	wDir, wCrt := nodeDir("w-1")
	p, wrote := project("w-1", kubepki.RoleDataPlane, wCrt)
	if !wrote {
		t.Fatal("first projection not written")
	}
	for _, n := range caKeys {
		if _, ok := p[n][kubepki.KeyKey]; ok {
			t.Fatalf("data plane projection holds %s's key", n)
		}
	}
	if _, ok := p["demo-ssh.cp-1"]; ok {
		t.Fatal("w-1 holds cp-1's SSH key")
	}
	if _, wrote := project("w-1", kubepki.RoleDataPlane, wCrt); wrote {
		t.Fatal("unchanged projection written again")
	}

	// The agent of w-1 opens it; the exec applier writes its files.
	src := kubepki.NodeSource{Store: e.st, Machine: "w-1", KeyFile: wDir.Key(pki.NodeLeaf)}
	got, err := src.Secret(ctx, "demo-bootstrap-token")
	if err != nil || !bytes.Equal(got[kubepki.KeyKubeconfig], e.secret(t, "demo-bootstrap-token").Spec.Data[kubepki.KeyKubeconfig]) {
		t.Fatalf("token through the node source: %v", err)
	}
	if _, err := src.Secret(ctx, "demo-sa"); !errors.Is(err, kubepki.ErrNotProjected) {
		t.Fatalf("a secret not projected: %v", err)
	}
	root := t.TempDir()
	paths := kubepki.DefaultPaths()
	files := l.HostFiles("w-1", kubepki.RoleDataPlane)
	for i := range files {
		files[i].Path = filepath.Join(root, files[i].Path) // under a temporary root
	}
	hf := &apply.HostFiles{Roots: []string{root}, Secrets: src}
	x, err := apply.NewExec(apply.ExecConfig{Command: []string{"true"}, HostFiles: hf})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Apply(ctx, apply.Generation{Machine: "w-1", Number: 1, Spec: api.NixosConfigurationSpec{Generation: 1, GitRepo: "g", HostFiles: files}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, paths.CACert))
	if err != nil || !bytes.Equal(b, e.secret(t, "demo-ca").Spec.Data[kubepki.KeyCert]) {
		t.Fatalf("ca.crt on the host: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, paths.SSHKey)); !strings.Contains(string(b), "OPENSSH PRIVATE KEY") {
		t.Fatalf("ssh key on the host: %.40q", b)
	}
	if _, err := os.Stat(filepath.Join(root, paths.CAKey)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("data plane has ca.key: %v", err)
	}

	// Another machine's key does not open w-1's projection.
	cpDir, cpCrt := nodeDir("cp-1")
	if _, err := (kubepki.NodeSource{Store: e.st, Machine: "w-1", KeyFile: cpDir.Key(pki.NodeLeaf)}).Secret(ctx, "demo-ca"); err == nil {
		t.Fatal("cp-1's key opened w-1's projection")
	}

	// cp-1 gets the CA key; a renewal re-projects.
	p, _ = project("cp-1", kubepki.RoleControlPlane, cpCrt)
	if len(p["demo-ca"][kubepki.KeyKey]) == 0 {
		t.Fatal("control plane projection lacks ca.key")
	}
	if _, err := kubepki.Renew(ctx, e.sec, c, t0.Add(6*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, wrote := project("cp-1", kubepki.RoleControlPlane, cpCrt); !wrote {
		t.Fatal("renewed certificates not projected")
	}
	// Select refuses another cluster's secret.
	ref := []api.HostFile{{Path: "/etc/kubernetes/x", SecretRef: &api.SecretKeyRef{Name: "demo-ca", Key: kubepki.KeyKey}}}
	if _, err := kubepki.Select(ctx, e.sec, "other", ref); !errors.Is(err, kubepki.ErrNotOwned) {
		t.Fatalf("select another cluster's secret: %v", err)
	}
	if err := kubepki.Unproject(ctx, e.sec, []string{"w-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Secret(ctx, "demo-bootstrap-token"); !errors.Is(err, kubepki.ErrNotProjected) {
		t.Fatalf("after unproject: %v", err)
	}
}
