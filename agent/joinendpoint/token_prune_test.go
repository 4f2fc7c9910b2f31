package joinendpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/token"
)

// TestJoinEndpointPrunesTokens: the endpoint deletes a token expired more
// than join.tokenPruneAfter ago, keeps one expired more recently, and logs
// the pruned id, never its secret.
func TestJoinEndpointPrunesTokens(t *testing.T) {
	cl := etcdtest.StartWith(t, etcdtest.Options{TLS: true})
	cpDir := etcdtest.ControlPlaneDir(t)
	box, err := secretbox.Load(cpDir.SecretsKey())
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	reg := token.NewRegistry(secrets.New(st, box))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := time.Now()
	spec := token.Spec{Roles: []api.Role{api.RoleWorker}, TTL: time.Hour}
	old, _, err := reg.Create(ctx, spec, now.Add(-3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	recent, _, err := reg.Create(ctx, spec, now.Add(-90*time.Minute))
	if err != nil {
		t.Fatal(err)
	}

	logs := &logging.Buffer{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(logs, testLog{t}), nil))
	je := New(Config{
		Name: "cp-1", Dir: cpDir, Listen: fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t)), Endpoints: cl.Endpoints(), Poll: 50 * time.Millisecond,
		TokenPruneAfter: time.Hour, TokenPruneInterval: 100 * time.Millisecond,
	}, log)
	served := make(chan error, 1)
	go func() { served <- je.Run(ctx) }()

	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := reg.Get(ctx, old.ID)
		if errors.Is(err, token.ErrUnknown) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("token expired 2h ago not pruned within 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := reg.Get(ctx, recent.ID); err != nil {
		t.Fatalf("token expired 30m ago: %v", err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("endpoint: %v", err)
	}
	out := logs.String()
	if !strings.Contains(out, old.ID) || !strings.Contains(out, "pruned join tokens") {
		t.Fatalf("the pruning is not logged with the id:\n%s", out)
	}
	if strings.Contains(out, old.Secret) || strings.Contains(out, recent.Secret) {
		t.Fatal("a token secret appears in the logs")
	}
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
