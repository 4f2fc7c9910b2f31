package enroll

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/token"
)

// TestRequestsObservedWithRefusalCodes: OnRequest hears of every request
// with "" when answered and the refusal's code otherwise (the metrics'
// reason label), and never with a token's id or secret.
func TestRequestsObservedWithRefusalCodes(t *testing.T) {
	w := newWorld(t, RateLimit{})
	ctx := context.Background()
	valid := w.token(worker, w.now)
	if _, err := Obtain(ctx, w.client(valid, "w-1", api.RoleWorker), pki.Dir(t.TempDir())); err != nil {
		t.Fatal(err)
	}
	unknown, _ := token.Generate()
	w.secrets = append(w.secrets, unknown.Secret)
	if _, err := Obtain(ctx, w.client(unknown, "w-2", api.RoleWorker), pki.Dir(t.TempDir())); err == nil {
		t.Fatal("a join with an unknown token succeeded")
	}
	w.mu.Lock()
	got := slices.Clone(w.observed)
	w.mu.Unlock()
	// The unknown token is refused at discovery, before it could join.
	for _, want := range []string{PathDiscovery + " ", PathJoin + " ", PathDiscovery + " " + CodeUnknown} {
		if !slices.Contains(got, want) {
			t.Errorf("observed %q, want %q among them", got, want)
		}
	}
	for _, o := range got {
		for _, tok := range []token.Token{valid, unknown} {
			if strings.Contains(o, tok.ID) || strings.Contains(o, tok.Secret) {
				t.Errorf("observed %q names a token", o)
			}
		}
	}
}
