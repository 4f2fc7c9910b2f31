package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/store"
)

// readyNotifier counts READY and keeps the last status.
type readyNotifier struct {
	quietNotifier
	ready  atomic.Int32
	mu     sync.Mutex
	status string
}

func (n *readyNotifier) Ready() error { n.ready.Add(1); return nil }

func (n *readyNotifier) Status(s string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.status = s
	return nil
}

func (n *readyNotifier) last() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.status
}

const objectsHeader = "apiVersion: nico.homystack.io/v1\nkind: FlakeObjects\nmetadata: {name: flake}\nspec: {revision: rev-1, lastModified: 1700000000}\n"

const objectsPool = "apiVersion: nico.homystack.io/v1\nkind: MachinePool\nmetadata: {name: web}\nspec:\n  count: 2\n  template: {vcpus: 1, memoryMiB: 512, diskGiB: 4, baseImage: x.qcow2, network: default}\n"

// objectsAgent starts a bootstrap control-plane agent whose objects.file
// holds the documents docs makes from its member's peer URL.
func objectsAgent(ctx context.Context, t *testing.T, docs func(peer string) []string) (*Agent, Config, *readyNotifier, member.Runtime, chan error) {
	t.Helper()
	peer, client := etcdtest.URLsFor(t, false)
	file := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(file, []byte(strings.Join(docs(peer), "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Name: "cp-1", Roles: []api.Role{api.RoleControlPlane}, Bootstrap: true,
		DataDir: filepath.Join(t.TempDir(), "etcd"), PeerURL: peer, ClientURL: client,
		ClusterToken: "objects-test", DialTimeout: 3 * time.Second, HeartbeatTTL: 2 * time.Second,
		RetryInterval: 200 * time.Millisecond, Version: "test", ObjectsFile: file,
	}
	a, n, rt, done := runAgent(ctx, t, cfg)
	return a, cfg, n, rt, done
}

// runAgent runs an agent with cfg.
func runAgent(ctx context.Context, t *testing.T, cfg Config) (*Agent, *readyNotifier, member.Runtime, chan error) {
	rt := member.NewEmbedded(member.WithTimings(50*time.Millisecond, 500*time.Millisecond))
	n := &readyNotifier{}
	a := New(cfg, rt, n, logging.Test(t))
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	return a, n, rt, done
}

// TestObjectsAppliedAtStart: a control-plane agent applies the flake's
// objects before it tells systemd it is ready, marked as this host's.
func TestObjectsAppliedAtStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, cfg, n, rt, done := objectsAgent(ctx, t, func(string) []string { return []string{objectsHeader, objectsPool} })
	waitFor(t, 60*time.Second, "agent healthy and ready", func() bool {
		select {
		case err := <-done:
			t.Fatalf("agent stopped: %v", err)
		default:
		}
		return a.Healthy() && n.ready.Load() == 1
	})
	st, err := store.New(etcdtest.NewClient(t, cfg.ClientURL), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	p := &api.MachinePool{}
	if err := st.Get(t.Context(), store.PoolKey("web"), p); err != nil {
		t.Fatalf("pool web: %v", err)
	}
	if p.Metadata.Declared == nil || p.Metadata.Declared.Host != "cp-1" || p.Metadata.Declared.Revision != "rev-1" {
		t.Fatalf("pool web's mark %+v, want revision rev-1 by cp-1", p.Metadata.Declared)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	waitMemberExited(t, rt)
}

// TestObjectsRefusedAtStartKeepsMember: a manifest refused against the
// cluster (an external member with the agent's own peer URL), or on its
// own (a negative count), writes nothing, and the agent keeps running,
// ready, its member serving: a start that failed would stop the member
// (on every control-plane host restarting into the same manifest). The
// refusal, naming the field, is in the unit's status.
func TestObjectsRefusedAtStartKeepsMember(t *testing.T) {
	for _, tc := range []struct {
		name string
		docs func(peer string) []string
		says func(peer string) []string
	}{
		{"against the cluster", func(peer string) []string {
			return []string{objectsHeader, objectsPool, fmt.Sprintf("apiVersion: nico.homystack.io/v1\nkind: EtcdCluster\nmetadata: {name: etcd}\nspec:\n  voters: 3\n  members:\n  - {name: ext-1, kind: external, peerURLs: [%q], clientURLs: [\"http://10.9.9.9:2379\"]}\n", peer)}
		}, func(peer string) []string {
			return []string{"spec.members[0].peerURLs[0]", peer, "declare an external member with URLs"}
		}},
		{"on its own", func(string) []string {
			return []string{objectsHeader, strings.Replace(objectsPool, "count: 2", "count: -1", 1)}
		}, func(string) []string { return []string{"spec.count -1 is not accepted; want 0 or more"} }},
	} {
		t.Run(tc.name, func(t *testing.T) { refusedAtStart(t, tc.docs, tc.says) })
	}
}

func refusedAtStart(t *testing.T, docs, says func(peer string) []string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, cfg, n, rt, done := objectsAgent(ctx, t, docs)
	waitFor(t, 60*time.Second, "agent healthy and ready", func() bool {
		select {
		case err := <-done:
			t.Fatalf("agent stopped: %v", err)
		default:
		}
		return a.Healthy() && n.ready.Load() == 1
	})
	// The status follows READY.
	waitFor(t, 10*time.Second, "the unit's status", func() bool { return strings.HasPrefix(n.last(), "ready") })
	for _, want := range append(says(cfg.PeerURL), "ready; the flake's objects not applied") {
		if s := n.last(); !strings.Contains(s, want) {
			t.Errorf("the unit's status %q lacks %q", s, want)
		}
	}
	st, err := store.New(etcdtest.NewClient(t, cfg.ClientURL), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{store.PoolKey("web"), store.FlakeObjectsKey} {
		if _, err := st.GetKV(t.Context(), key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: %v, want absent", key, err)
		}
	}
	ec := &api.EtcdCluster{}
	if err := st.Get(t.Context(), store.EtcdClusterKey, ec); err == nil && len(ec.Spec.Members) > 0 {
		t.Errorf("the EtcdCluster has the refused members %+v", ec.Spec.Members)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	waitMemberExited(t, rt)
}
