package kubeapi_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/kubeapi"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/pki"
)

// TestFromKubeconfig: a bootstrap kubeconfig gives a token client of its
// server; a kubeconfig without a CA or a credential is refused, naming
// what is missing.
func TestFromKubeconfig(t *testing.T) {
	ca, err := pki.NewCA("test", 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	good, err := kubepki.TokenKubeconfig("c1", "https://10.0.0.1:6443", "kubelet-bootstrap", ca.CertPEM, "abcdef.0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubeapi.FromKubeconfig(good)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Server != "https://10.0.0.1:6443" || c.Token != "abcdef.0123456789abcdef" {
		t.Fatalf("client %+v", c)
	}
	noCA, _ := kubepki.TokenKubeconfig("c1", "https://10.0.0.1:6443", "u", nil, "abcdef.0123456789abcdef")
	if _, err := kubeapi.FromKubeconfig(noCA); !errors.Is(err, kubeapi.ErrBadKubeconfig) || !strings.Contains(err.Error(), "certificate-authority-data") {
		t.Fatalf("no CA: %v", err)
	}
	noUser := strings.Replace(string(good), "token: abcdef.0123456789abcdef", "{}", 1)
	if _, err := kubeapi.FromKubeconfig([]byte(noUser)); !errors.Is(err, kubeapi.ErrBadKubeconfig) || !strings.Contains(err.Error(), "or a token") {
		t.Fatalf("no credential: %v", err)
	}
	if _, err := kubeapi.FromKubeconfig([]byte("clusters: [")); !errors.Is(err, kubeapi.ErrBadKubeconfig) {
		t.Fatalf("garbage: %v", err)
	}
}

// TestBootstrapObjects: the token's Secret carries what the API server's
// bootstrap authenticator reads, and the bindings name Kubernetes' roles.
func TestBootstrapObjects(t *testing.T) {
	exp := time.Date(2026, 12, 8, 12, 0, 0, 0, time.UTC)
	sec, binds := kubeapi.Bootstrap{TokenID: "abcdef", TokenSecret: "0123456789abcdef", Expires: exp, Group: "system:bootstrappers:nico:c1"}.Objects()
	if sec.Metadata.Name != "bootstrap-token-abcdef" || sec.Metadata.Namespace != "kube-system" || sec.Type != "bootstrap.kubernetes.io/token" {
		t.Fatalf("secret %+v", sec.Metadata)
	}
	for k, v := range map[string]string{"token-id": "abcdef", "token-secret": "0123456789abcdef", "expiration": "2026-12-08T12:00:00Z",
		"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true", "auth-extra-groups": "system:bootstrappers:nico:c1"} {
		if string(sec.Data[k]) != v {
			t.Errorf("secret %s = %q, want %q", k, sec.Data[k], v)
		}
	}
	want := map[string]string{
		kubeapi.RoleNodeBootstrapper: "system:bootstrappers:nico:c1", kubeapi.RoleNodeClient: "system:bootstrappers:nico:c1",
		kubeapi.RoleSelfNodeClient: "system:nodes", kubeapi.RoleNodeProxier: "system:nodes",
	}
	if len(binds) != len(want) {
		t.Fatalf("%d bindings", len(binds))
	}
	for _, b := range binds {
		if g, ok := want[b.RoleRef.Name]; !ok || len(b.Subjects) != 1 || b.Subjects[0].Name != g || b.Subjects[0].Kind != "Group" {
			t.Errorf("binding %s: %+v %+v", b.Metadata.Name, b.RoleRef, b.Subjects)
		}
	}
}
