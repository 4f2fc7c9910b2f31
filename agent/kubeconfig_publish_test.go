package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	"gopkg.in/yaml.v3"
)

const k3sYAML = `apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: Q0EK
    server: https://127.0.0.1:6443
  name: default
contexts:
- context:
    cluster: default
    user: default
  name: default
current-context: default
kind: Config
preferences: {}
users:
- name: default
  user:
    client-certificate-data: %s
    client-key-data: S0VZCg==
`

// TestKubeconfigPublished: the publisher of a cluster whose distribution
// writes its own kubeconfig reports a missing file and an unparseable one
// naming the path; a kubeconfig is published sealed as <cluster>-kubeconfig
// (key value) with its server rewritten to the control-plane endpoint and
// everything else kept, published again when the file changes; another
// control-plane machine publishes nothing.
func TestKubeconfigPublished(t *testing.T) {
	st := oneMemberStore(t)
	ctx := t.Context()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "secrets.key")
	key, err := secretbox.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.WriteFile(keyFile, key); err != nil {
		t.Fatal(err)
	}
	box, err := secretbox.Load(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "cp-1")
	publisher := func(name string) func() {
		a := New(Config{Name: name, Roles: []api.Role{api.RoleControlPlane}, KubeconfigPublish: KubeconfigPublishConfig{SecretsKey: keyFile,
			ReadFile: func(p string) ([]byte, error) { return os.ReadFile(filepath.Join(root, p)) }}}, nil, quietNotifier{}, logging.Test(t))
		a.use(st.Client(), st)
		ctrl := a.kubeconfigPublish()
		return func() {
			t.Helper()
			if err := ctrl.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	cp1, cp2 := publisher("cp-1"), publisher("cp-2")
	const path = "/etc/rancher/k3s/k3s.yaml"
	kc := api.NewKubernetesCluster("k1")
	kc.Spec.Kubeconfig.Path = path
	kc.Status.ControlPlane.ReadyMachines = []string{"cp-2", "cp-1"}
	kc.Status.ControlPlaneEndpoint = "10.0.0.5:6443"
	kc.Status.Conditions = []api.ClusterCondition{{Type: api.CondControlPlaneReady, Status: api.ConditionTrue}}
	for _, m := range []string{"cp-1", "cp-2"} {
		if _, err := st.Client().Put(ctx, store.ClusterClaimKey(m), "k1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.PutObject(ctx, kc); err != nil {
		t.Fatal(err)
	}
	report := func() *api.KubeconfigReport {
		t.Helper()
		r := api.NewKubeconfigReport("k1")
		if err := st.Get(ctx, store.KubeconfigReportKey("k1"), r); err != nil {
			return nil
		}
		return r
	}
	published := func() []byte {
		t.Helper()
		sec := api.NewSecret("k1-kubeconfig")
		if err := secrets.New(st, box).Get(ctx, store.NamedSecretKey("k1-kubeconfig"), sec); err != nil {
			return nil
		}
		if sec.Spec.Cluster != "k1" {
			t.Errorf("published secret's cluster %q", sec.Spec.Cluster)
		}
		return sec.Spec.Data[api.KubeconfigSecretKey]
	}

	cp2()
	if r := report(); r != nil {
		t.Fatalf("cp-2 (not the publisher) reported %+v", r.Status)
	}
	cp1()
	if r := report(); r == nil || r.Status.Published || r.Status.Machine != "cp-1" || !strings.Contains(r.Status.Message, path) || !strings.Contains(r.Status.Message, "no such file") {
		t.Fatalf("missing file: report %+v", r)
	}
	file := filepath.Join(root, path)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("{{ not yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	cp1()
	if r := report(); r.Status.Published || !strings.Contains(r.Status.Message, path) || !strings.Contains(r.Status.Message, "not a kubeconfig") {
		t.Fatalf("unparseable file: report %+v", r.Status)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(k3sYAML, "%s", "Q0VSVDEK", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	cp1()
	if r := report(); !r.Status.Published || r.Status.Server != "https://10.0.0.5:6443" || r.Status.Message != "" {
		t.Fatalf("kubeconfig: report %+v", r.Status)
	}
	var got struct {
		Kind     string `yaml:"kind"`
		Clusters []struct {
			Cluster map[string]string `yaml:"cluster"`
		} `yaml:"clusters"`
		Users []struct {
			User map[string]string `yaml:"user"`
		} `yaml:"users"`
		CurrentContext string `yaml:"current-context"`
	}
	if err := yaml.Unmarshal(published(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != "Config" || len(got.Clusters) != 1 || got.Clusters[0].Cluster["server"] != "https://10.0.0.5:6443" ||
		got.Clusters[0].Cluster["certificate-authority-data"] != "Q0EK" || got.Users[0].User["client-certificate-data"] != "Q0VSVDEK" || got.CurrentContext != "default" {
		t.Fatalf("published kubeconfig %+v", got)
	}
	rev := report().Metadata.Revision
	cp1()
	if r := report(); r.Metadata.Revision != rev {
		t.Fatalf("report rewritten with nothing changed: %+v", r.Status)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(k3sYAML, "%s", "TkVXCg==", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	cp1()
	if !strings.Contains(string(published()), "TkVXCg==") {
		t.Fatalf("the changed file was not published again:\n%s", published())
	}
}
