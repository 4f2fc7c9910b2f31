package etcdclient

import (
	"crypto/tls"
	"errors"
	"testing"
	"time"
)

func TestSchemeMustMatchTLS(t *testing.T) {
	tests := []struct {
		name string
		eps  []string
		tls  *tls.Config
		err  bool
	}{
		{"https without TLS", []string{"https://127.0.0.1:1"}, nil, true},
		{"http with TLS", []string{"http://127.0.0.1:1"}, &tls.Config{}, true},
		{"mixed", []string{"https://127.0.0.1:1", "http://127.0.0.1:2"}, &tls.Config{}, true},
		{"https with TLS", []string{"https://127.0.0.1:1"}, &tls.Config{}, false},
		{"http plaintext", []string{"http://127.0.0.1:1"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cli, err := New(Config{Endpoints: tt.eps, DialTimeout: time.Second, TLS: tt.tls})
			if tt.err {
				if !errors.Is(err, ErrPlaintext) {
					t.Fatalf("New = %v, want ErrPlaintext", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			if TLSOf(cli) != tt.tls {
				t.Errorf("TLSOf = %p, want %p", TLSOf(cli), tt.tls)
			}
		})
	}
	if TLSOf(nil) != nil {
		t.Error("TLSOf(nil) != nil")
	}
}
