package gossipkey

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/store"
	"github.com/homystack/nico/pkg/testwait"
)

func TestRotateAndFollow(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	st, err := store.New(cl.Client(t), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if k, err := Current(ctx, st); err != nil || k.Spec.Generation != 0 {
		t.Fatalf("fresh cluster: %+v, %v", k, err)
	}
	// Concurrent rotations each take their own generation.
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := Rotate(ctx, st, "test", time.Now()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if k, _ := Current(ctx, st); k.Spec.Generation != 3 || k.Spec.RotatedBy != "test" {
		t.Fatalf("after 3 rotations: %+v", k.Spec)
	}
	// A real mesh member follows the stored generation.
	m, err := gossip.New(gossip.Config{Name: "a", BindAddr: "127.0.0.90", Token: []byte("t"), Profile: gossip.ProfileFast})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	done := make(chan struct{})
	go func() { defer close(done); Follow(ctx, st, m, 20*time.Millisecond, logging.Test(t)) }()
	testwait.For(t, 10*time.Second, "the member at generation 3", func() (bool, string) {
		g := m.KeyGeneration()
		return g == 3, fmt.Sprintf("member at generation %d, want 3", g)
	})
	cancel()
	<-done
}
