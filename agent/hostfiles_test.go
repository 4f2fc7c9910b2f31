package agent

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/store"
)

// lockedSecrets is a Secrets a test changes while the agent reads it.
type lockedSecrets struct {
	mu sync.Mutex
	m  map[string]map[string][]byte
}

func (l *lockedSecrets) Secret(_ context.Context, name string) (map[string][]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[name], nil
}

func (l *lockedSecrets) set(name, key, v string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[name] = map[string][]byte{key: []byte(v)}
}

// TestRenewedSecretReachesTheHost: a generation's host file follows its
// secret when the machine's projected secrets change, with no new
// generation (a renewed certificate would otherwise stay stale on the
// host until the next one and expire there).
func TestRenewedSecretReachesTheHost(t *testing.T) {
	st := oneMemberStore(t)
	root := t.TempDir()
	sec := &lockedSecrets{m: map[string]map[string][]byte{}}
	sec.set("demo-apiserver-etcd-client", "tls.crt", "cert-1")
	hf := &apply.HostFiles{Roots: []string{root}, Secrets: sec}
	x, err := apply.NewExec(apply.ExecConfig{Command: []string{"true"}, HostFiles: hf})
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{Name: "cp-1", Roles: []api.Role{api.RoleWorker}, RetryInterval: time.Hour, Applier: x, HostFiles: hf}, nil, quietNotifier{}, logging.Test(t))
	a.use(st.Client(), st)
	path := filepath.Join(root, "pki", "apiserver-etcd-client.crt")
	c := api.NewNixosConfiguration("cp-1")
	c.Spec = api.NixosConfigurationSpec{Generation: 1, GitRepo: "g", HostFiles: []api.HostFile{{Path: path, SecretRef: &api.SecretKeyRef{Name: "demo-apiserver-etcd-client", Key: "tls.crt"}}}}
	if err := st.Put(t.Context(), store.NixosConfigKey("cp-1"), c); err != nil {
		t.Fatal(err)
	}
	g := (&groups{rt: a.rt}).start(t.Context(), a.generations())
	defer g.stop()
	content := func(want string) func() bool {
		return func() bool { b, _ := os.ReadFile(path); return string(b) == want }
	}
	waitFor(t, 10*time.Second, "generation 1's host file", content("cert-1"))
	// The leader renews and re-projects: the projection's key changes.
	sec.set("demo-apiserver-etcd-client", "tls.crt", "cert-2")
	ns := api.NewNodeSecrets("cp-1")
	ns.Spec.Generation = 2
	if err := st.PutObject(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the renewed certificate on the host", content("cert-2"))
}
