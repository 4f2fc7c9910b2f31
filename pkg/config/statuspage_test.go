package config

import (
	"strings"
	"testing"
)

// TestStatusPageListen: loopback needs nothing more, any other address
// needs the three TLS files, and the error names the key and what to give.
func TestStatusPageListen(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		err  string
	}{
		{"default loopback", nil, ""},
		{"off", map[string]string{"NICO_STATUSPAGE_LISTEN": ""}, ""},
		{"all addresses without tls", map[string]string{"NICO_STATUSPAGE_LISTEN": ":9490"}, `statusPage.listen: ":9490" is not accepted without statusPage.tls.certFile`},
		{"with tls", map[string]string{
			"NICO_STATUSPAGE_LISTEN":           "10.0.0.1:9490",
			"NICO_STATUSPAGE_TLS_CERTFILE":     "/p/s.crt",
			"NICO_STATUSPAGE_TLS_KEYFILE":      "/p/s.key",
			"NICO_STATUSPAGE_TLS_CLIENTCAFILE": "/p/ca.crt",
		}, ""},
		{"no port", map[string]string{"NICO_STATUSPAGE_LISTEN": "127.0.0.1"}, "statusPage.listen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("NICO_ETCD_ENDPOINTS", "https://127.0.0.1:2379")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := LoadCoordinator(nil)
			if tc.err == "" && err != nil {
				t.Fatalf("LoadCoordinator: %v", err)
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("LoadCoordinator error %v, want it to contain %q", err, tc.err)
			}
		})
	}
}
