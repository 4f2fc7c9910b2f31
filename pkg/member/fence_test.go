package member

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFencedDataDirIsNeverServed: every runtime refuses a fenced data dir
// before it starts anything (restore and recovery fence the old members).
func TestFencedDataDirIsNeverServed(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(filepath.Join(dir, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteFence(dir, Fence{By: "restore-1", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	f, ok, err := ReadFence(dir)
	if err != nil || !ok || f.By != "restore-1" {
		t.Fatalf("ReadFence = %+v %v %v", f, ok, err)
	}
	cfg := Config{Name: "a", DataDir: dir, PeerURL: "http://127.0.0.1:1", ClientURL: "http://127.0.0.1:2"}
	for name, rt := range map[string]Runtime{"embedded": NewEmbedded(), "exec": NewExec("/nonexistent/etcd")} {
		if err := rt.Start(context.Background(), cfg); !errors.Is(err, ErrFenced) {
			t.Errorf("%s: Start on a fenced data dir = %v, want ErrFenced", name, err)
		}
	}
	if err := WriteFence(filepath.Join(t.TempDir(), "absent"), Fence{By: "x"}); err != nil {
		t.Fatalf("fencing an absent data dir: %v", err)
	}
}
