package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	tests := []struct {
		level, format string
		wantErr       []string // substrings; empty means no error
	}{
		{"debug", "text", nil},
		{"info", "json", nil},
		{"warn", "text", nil},
		{"error", "json", nil},
		{"verbose", "text", []string{`level "verbose"`, "debug, info, warn, error"}},
		{"info", "xml", []string{`format "xml"`, "text, json"}},
		{"INFO", "yaml", []string{`level "INFO"`, `format "yaml"`}},
	}
	for _, tt := range tests {
		t.Run(tt.level+"/"+tt.format, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := New(&buf, tt.level, tt.format)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatal("New succeeded, want an error")
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if log == nil {
				t.Fatal("New returned a nil logger")
			}
		})
	}
}

func TestNewLevelFilters(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "warn", "json")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("dropped")
	log.Warn("kept", "node", "cp-1")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d records, want 1: %q", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("record is not JSON: %v", err)
	}
	if rec["msg"] != "kept" || rec["node"] != "cp-1" || rec["level"] != "WARN" {
		t.Errorf("record = %v", rec)
	}
}

// recorder is a testing.TB that keeps what is logged to it.
type recorder struct {
	testing.TB
	logs     []string
	cleanups []func()
}

func (r *recorder) Helper()          { r.TB.Helper() }
func (r *recorder) Log(args ...any)  { r.logs = append(r.logs, args[0].(string)) }
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recorder) finish() {
	for _, f := range r.cleanups {
		f()
	}
}

func TestTestLogsToT(t *testing.T) {
	r := &recorder{TB: t}
	log := Test(r)
	log.Debug("hello", "member", 7)
	r.finish()
	log.Info("after the test")
	if len(r.logs) != 1 {
		t.Fatalf("logs = %q, want one record", r.logs)
	}
	if !strings.Contains(r.logs[0], "msg=hello") || !strings.Contains(r.logs[0], "member=7") || strings.HasSuffix(r.logs[0], "\n") {
		t.Errorf("log = %q", r.logs[0])
	}
}

func TestTestRealT(t *testing.T) {
	Test(t).Info("logged to t", "op", "test")
}
