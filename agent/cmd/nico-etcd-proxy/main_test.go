package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRunRefusesBadUsage: an unknown flag, unreadable files and a bad
// namespace exit 2 naming what is wrong.
func TestRunRefusesBadUsage(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"unknown flag":  {[]string{"--bogus"}, "unknown flag: --bogus"},
		"missing files": {[]string{"--namespace=/clusters/a/", "--endpoints=https://127.0.0.1:2379", "--etcd-cacert=/nonexistent/ca.crt"}, "etcd CA: stat /nonexistent/ca.crt"},
	} {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(t.Context(), tc.args, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), tc.want)
			}
		})
	}
}
