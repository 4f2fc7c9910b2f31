package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestBadInputExitsTwo(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{}, []string{"etcd.endpoints"}},
		{[]string{"--etcd.endpoints", "https://127.0.0.1:2379", "--coordinator.sessionTTL", "1500ms"}, []string{"coordinator.sessionTTL", "1.5s"}},
		{[]string{"--etcd.endpoints", "https://127.0.0.1:2379", "--coordinator.healthTimeout", "1m"}, []string{"coordinator.healthTimeout", "1m"}},
		{[]string{"--etcd.endpoints", "ftp://x:1"}, []string{"etcd.endpoints", "ftp://x:1"}},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		if code := run(tt.args, &out); code != 2 {
			t.Fatalf("%v: exit %d, want 2; output:\n%s", tt.args, code, out.String())
		}
		for _, w := range tt.want {
			if !strings.Contains(strings.ToLower(out.String()), strings.ToLower(w)) {
				t.Errorf("%v: output does not name %q:\n%s", tt.args, w, out.String())
			}
		}
	}
}

// TestHelpNamesExitCodesAndEndpoints: --help exits 0 and says what each
// exit code means and where the etcd endpoints come from.
func TestHelpNamesExitCodesAndEndpoints(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"--help"}, &out); code != 0 {
		t.Fatalf("--help exits %d, want 0:\n%s", code, out.String())
	}
	for _, w := range []string{"Exit codes", "  0  stopped by SIGTERM", "  1  failed", "  2  bad configuration", "empty means learned from the gossip mesh", "waits for the identity"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("--help lacks %q:\n%s", w, out.String())
		}
	}
}
