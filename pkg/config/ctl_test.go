package config

import (
	"reflect"
	"testing"
	"time"
)

func loadCtl(t *testing.T, in input) (Ctl, error) {
	t.Helper()
	return LoadCtl(in.apply(t, CtlFlags))
}

func TestCtl(t *testing.T) {
	tests := []struct {
		name string
		in   input
		want Ctl
	}{
		{"defaults", input{}, Ctl{Endpoints: []string{"https://127.0.0.1:2379"}, Prefix: "/nico/v1/", Timeout: 5 * time.Second, Output: "table"}},
		{"file", input{file: "endpoints: [https://a:2379, https://b:2379]\nstore: {prefix: /x/}\ntimeout: 1m\noutput: yaml\n"},
			Ctl{Endpoints: []string{"https://a:2379", "https://b:2379"}, Prefix: "/x/", Timeout: time.Minute, Output: "yaml"}},
		{"env", input{env: map[string]string{"NICO_ENDPOINTS": "https://a:2379,https://b:2379", "NICO_OUTPUT": "json", "NICO_TIMEOUT": "2s", "NICO_DIALTIMEOUT": "500ms"}},
			Ctl{Endpoints: []string{"https://a:2379", "https://b:2379"}, Prefix: "/nico/v1/", Timeout: 2 * time.Second, DialTimeout: 500 * time.Millisecond, Output: "json"}},
		{"shorthand", input{args: []string{"-o", "json", "--endpoints=https://c:2379"}, env: map[string]string{"NICO_OUTPUT": "yaml"}},
			Ctl{Endpoints: []string{"https://c:2379"}, Prefix: "/nico/v1/", Timeout: 5 * time.Second, Output: "json"}},
	}
	for _, tt := range tests {
		if tt.want.DialTimeout == 0 {
			tt.want.DialTimeout = 2 * time.Second
		}
		tt.want.TLS = rootTLS
		tt.want.Secrets = Secrets{KeyFile: "/var/lib/nico/pki/secrets.key"}
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadCtl(t, tt.in)
			if err != nil {
				t.Fatalf("LoadCtl: %v", err)
			}
			if !reflect.DeepEqual(c, tt.want) {
				t.Errorf("LoadCtl = %+v, want %+v", c, tt.want)
			}
		})
	}
}

func TestCtlInvalidValues(t *testing.T) {
	tests := []struct {
		env, value string
		wants      []string
	}{
		{"NICO_ENDPOINTS", ",", []string{"config: endpoints: [] is not accepted"}},
		{"NICO_ENDPOINTS", "localhost:2379", []string{"endpoints:", `"localhost:2379"`, "https URL"}},
		{"NICO_STORE_PREFIX", "x", []string{"store.prefix:", `"x"`, "starts and ends with /"}},
		{"NICO_TIMEOUT", "0s", []string{"timeout:", "0s", "above 0"}},
		{"NICO_DIALTIMEOUT", "2m", []string{"dialTimeout:", "2m", "at most 1m"}},
		{"NICO_OUTPUT", "wide", []string{"output:", `"wide"`, "table, json, yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			_, err := loadCtl(t, input{env: map[string]string{tt.env: tt.value}})
			wantErr(t, err, tt.wants...)
		})
	}
}
