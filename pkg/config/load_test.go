package config

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestDescribeMatchesFlags(t *testing.T) {
	programs := map[string]func(*pflag.FlagSet){
		"agent":       AgentFlags,
		"coordinator": CoordinatorFlags,
		"ctl":         CtlFlags,
	}
	for program, addFlags := range programs {
		t.Run(program, func(t *testing.T) {
			docs := Describe(program)
			if len(docs) == 0 {
				t.Fatal("Describe returned no keys")
			}
			fs := pflag.NewFlagSet(program, pflag.ContinueOnError)
			addFlags(fs)
			if fs.Lookup("config") == nil {
				t.Error("no --config flag")
			}
			for _, d := range docs {
				f := fs.Lookup(d.Key)
				if f == nil {
					t.Errorf("key %s has no flag of the same name", d.Key)
					continue
				}
				if d.Help == "" {
					t.Errorf("key %s has no help", d.Key)
				}
				// pflag prints lists as [a,b] and durations as 2m0s.
				def := strings.Trim(f.DefValue, "[]")
				if f.Value.Type() == "duration" {
					dur, _ := time.ParseDuration(def)
					def = fmtDuration(dur)
				}
				if def != d.Default {
					t.Errorf("key %s: flag default %q, Describe default %q", d.Key, f.DefValue, d.Default)
				}
				if want := "(env " + d.Env + ")"; !strings.Contains(f.Usage, want) {
					t.Errorf("flag --%s usage %q does not name %s", d.Key, f.Usage, d.Env)
				}
			}
			if fs.NFlag() != 0 {
				t.Errorf("flags set without parsing: %d", fs.NFlag())
			}
		})
	}
	if Describe("kubelet") != nil {
		t.Error("Describe of an unknown program is not nil")
	}
}

func TestEnvName(t *testing.T) {
	tests := map[string]string{
		"etcd.peerURL":           "NICO_ETCD_PEERURL",
		"coordinator.sessionTTL": "NICO_COORDINATOR_SESSIONTTL",
		"name":                   "NICO_NAME",
	}
	for key, want := range tests {
		if got := envName(key); got != want {
			t.Errorf("envName(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestFmtDuration(t *testing.T) {
	tests := map[string]string{"5m0s": "5m", "1h0m0s": "1h", "1h30m0s": "1h30m", "2.5s": "2.5s", "100ms": "100ms", "1m30s": "1m30s"}
	for in, want := range tests {
		d, err := parseDuration(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmtDuration(d); got != want {
			t.Errorf("fmtDuration(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"name", "name", 0}, {"nmae", "name", 2}, {"etcd.peerurls", "etcd.peerurl", 1}, {"", "abc", 3},
	}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestLoadWithoutFlags(t *testing.T) {
	input{env: map[string]string{"NICO_BOOTSTRAP": "true", "NICO_NAME": "cp-9"}}.apply(t, func(*pflag.FlagSet) {})
	a, err := LoadAgent(nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "cp-9" || !a.Bootstrap {
		t.Errorf("LoadAgent(nil) = %+v", a)
	}
}
