package logging

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
)

// Test returns a debug-level text logger that writes each record to t.Log,
// so a test's logs appear with its output and only when it fails or runs
// with -v. Records written after the test has finished are dropped rather
// than panicking, which goroutines that outlive a test can otherwise cause.
func Test(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testWriter forwards whole records (one Write per record, as slog's
// handlers do) to t.Log until the test ends.
type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Helper()
		w.t.Log(string(bytes.TrimSuffix(p, []byte("\n"))))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
}
