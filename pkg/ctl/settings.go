package ctl

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// settings are nicoctl's connection and output settings.
//
// TODO(config): this is a stand-in for config.Ctl / config.CtlFlags /
// config.LoadCtl; swap when pkg/config lands.
type settings struct {
	Endpoints []string
	Prefix    string
	Timeout   time.Duration
	Output    string
}

// Output formats.
var outputs = []string{"table", "json", "yaml"}

const (
	defaultEndpoint = "http://127.0.0.1:2379"
	defaultTimeout  = 5 * time.Second
)

// ctlFlags registers the settings' flags on fs.
func ctlFlags(fs *pflag.FlagSet) {
	fs.StringSlice("endpoints", nil, "etcd client URLs, comma separated (env NICO_ENDPOINTS; default "+defaultEndpoint+")")
	fs.String("config", "", "config file, YAML with endpoints, prefix, timeout, output (env NICO_CONFIG)")
	fs.Duration("timeout", defaultTimeout, "how long to wait for the cluster to answer (env NICO_TIMEOUT)")
	fs.StringP("output", "o", "table", "output format: table, json or yaml (env NICO_OUTPUT)")
	fs.String("prefix", store.DefaultPrefix, "nico's keyspace prefix in etcd (env NICO_PREFIX)")
}

// fileSettings is the config file's shape.
type fileSettings struct {
	Endpoints []string `yaml:"endpoints"`
	Prefix    string   `yaml:"prefix"`
	Timeout   string   `yaml:"timeout"`
	Output    string   `yaml:"output"`
}

// loadConfig reads the settings: a flag set on the command line wins, then
// the NICO_* environment variable, then the config file, then the default.
func loadConfig(cmd *cobra.Command) (settings, error) {
	fs := cmd.Flags()
	get := func(flag, env string) (string, bool) {
		if f := fs.Lookup(flag); f != nil && f.Changed {
			if flag == "endpoints" {
				v, _ := fs.GetStringSlice(flag)
				return strings.Join(v, ","), true
			}
			return f.Value.String(), true
		}
		if v, ok := os.LookupEnv(env); ok && v != "" {
			return v, true
		}
		return "", false
	}
	var file fileSettings
	if path, ok := get("config", "NICO_CONFIG"); ok {
		b, err := os.ReadFile(path)
		if err != nil {
			return settings{}, fmt.Errorf("config file: %w", err)
		}
		if err := yaml.Unmarshal(b, &file); err != nil {
			return settings{}, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	s := settings{Endpoints: []string{defaultEndpoint}, Prefix: store.DefaultPrefix, Timeout: defaultTimeout, Output: "table"}
	if len(file.Endpoints) > 0 {
		s.Endpoints = file.Endpoints
	}
	if v, ok := get("endpoints", "NICO_ENDPOINTS"); ok {
		s.Endpoints = splitList(v)
	}
	s.Prefix = pick(s.Prefix, file.Prefix)
	if v, ok := get("prefix", "NICO_PREFIX"); ok {
		s.Prefix = v
	}
	timeout := file.Timeout
	if v, ok := get("timeout", "NICO_TIMEOUT"); ok {
		timeout = v
	}
	if timeout != "" {
		d, err := time.ParseDuration(timeout)
		if err != nil || d <= 0 {
			return settings{}, fmt.Errorf("timeout %q: want a positive duration such as 5s", timeout)
		}
		s.Timeout = d
	}
	s.Output = pick(s.Output, file.Output)
	if v, ok := get("output", "NICO_OUTPUT"); ok {
		s.Output = v
	}
	if !slices.Contains(outputs, s.Output) {
		return settings{}, fmt.Errorf("output %q: want one of %s", s.Output, strings.Join(outputs, ", "))
	}
	if len(s.Endpoints) == 0 {
		return settings{}, fmt.Errorf("endpoints: none given; want etcd client URLs such as %s", defaultEndpoint)
	}
	if !strings.HasPrefix(s.Prefix, "/") || !strings.HasSuffix(s.Prefix, "/") {
		return settings{}, fmt.Errorf("prefix %q: must start and end with \"/\"", s.Prefix)
	}
	return s, nil
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func pick(def, v string) string {
	if v != "" {
		return v
	}
	return def
}
